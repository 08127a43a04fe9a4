# Run: make run   (= python experiments/quickstart.py --workdir runs/quickstart)
#      or: depthscale run --config experiments/quickstart.py --workdir runs/quickstart
"""Quickstart: how much depth does k-hop induction need (Sanford et al., scaled down)?

k drawn per sequence from 0..4 (given as a prefix token), 4 letters, strings of 24;
depths 1-4 x 2 seeds at width 32, trained as one depth-compacted program on whatever
devices JAX sees; per-position accuracy on a fixed held-out set, n*, the depth fit, plots and a
report in WORKDIR, with the paper's claims checked (claims.json). The same models as
`khop_depth.py:cpu`. A few minutes on a 2-core CPU (BUILD_NOTES.md has the figures).
Stopping rule: none, as khop_depth.py:cpu (its docstring says why).
"""
import argparse
import os
import sys

from depthscale import config


def get_config(arg=None):
  """khop_depth.py:cpu under its own name (its paper's claims and published table too)."""
  args = config.study_args(arg, ("smoke", "grow"))
  grow = ",grow" if "grow" in args else ""
  c = config.load(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                               f"khop_depth.py:cpu{grow}"))
  c.name = "quickstart"
  if "smoke" in args:
    c = config.smoke(c, length=16, depths=(1, 2, 3))
    c.plan.strategy = "pad"  # the padded program the tests compare runs of (conftest)
    if grow:
      c.train.length_max = 4 * max(c.grid.length)
  return c


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--workdir", default="runs/quickstart")
  ap.add_argument("--smoke", action="store_true", help="the 2-minute smoke variant")
  args = ap.parse_args(argv)
  from depthscale import cli
  spec = __file__ + (":smoke" if args.smoke else "")
  code = cli.main(["run", "--config", spec, "--workdir", args.workdir])
  if code == 0:
    print(f"report: {os.path.join(args.workdir, 'report.md')}")
  return code


if __name__ == "__main__":
  sys.exit(main())
