# Run: make run   (= python experiments/quickstart.py --workdir runs/quickstart)
#      or: depthscale run --config experiments/quickstart.py --workdir runs/quickstart
"""Quickstart: how much depth does k-hop induction need (Sanford et al., scaled down)?

k drawn per sequence from 0..4 (given as a prefix token), 4 letters, strings of 24;
depths 1-4 x 2 seeds at width 32, trained as one padded program on whatever devices JAX
sees; per-position accuracy on a fixed held-out set, n*, the depth fit, plots and a
report in WORKDIR. About 5 minutes on a 2-core CPU (BUILD_NOTES.md has the figures:
depth = 1.25 log2 n* - 1.93, r^2 0.92, and the hardest k solved grows 0, 1, 2-3, 4).
"""
import argparse
import os
import sys

from depthscale import config


def get_config(arg=None):
  args = config.study_args(arg, ("smoke",))
  c = config.defaults()
  c.name = "quickstart"
  c.task, c.task_options = "khop", {"k": None, "k_max": 4, "alphabet": 4}
  c.grid.update(dict(depth=[1, 2, 3, 4], width=[32], seed=[0, 1], lr=[3e-3], length=[24],
                     repeats=[1]))
  c.model.update(dict(heads=2, pos="learned"))
  c.train.update(dict(batch_size=32, steps=4000, steps_per_call=100, warmup=200,
                      weight_decay=0.01))
  c.checkpoint_every = 1000
  c.plan.strategy = "pad"
  if "smoke" in args:
    c = config.smoke(c, length=16, depths=(1, 2, 3))
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
