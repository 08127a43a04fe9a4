"""An adaptive study against its grid, live on this machine (issue 58 item 6).

For each seed set, trains `experiments/khop_depth.py:cpu,grow,adaptive` twice through
`depthscale run`, one after the other: as its grid (design.kind=grid, every depth x the 4
grid seeds) and adaptively (the same cells, seeds past the grid's continuing from its
largest). Prints and writes (--json) per seed set: the claims' verdicts, the design's
slope and 95% interval (report/cell_law.py on each run's rows), the compute (planner
FLOPs of the models trained) and the wall time of each, and whether the adaptive study's
claims equal the grid's, its slope lies in the grid's interval and its compute is at most
60% of the grid's.

  .venv/bin/python tools/bench/design_live.py --seeds 10 20 --json live.json
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from depthscale.report import cell_law  # noqa: E402
from depthscale.sweep import plan  # noqa: E402

SPEC = "experiments/khop_depth.py:cpu,grow,adaptive"


def train(workdir: str, seeds: list[int], kind: str) -> float:
  """One study through `depthscale run`; its wall seconds, kept beside it (<workdir>.wall):
  a study this script finished before is read, not rerun (a grid compared again with a
  changed rule keeps its measured time)."""
  kept = workdir + ".wall"
  if os.path.exists(kept):
    with open(kept) as f:
      return float(f.read())
  t0 = time.perf_counter()
  subprocess.run([sys.executable, "-m", "depthscale.cli", "run", "--config", SPEC,
                  "--workdir", workdir, "--no-progress", f"--config.grid.seed={seeds}",
                  f"--config.design.kind={kind}"], cwd=ROOT, check=True,
                 env=dict(os.environ, WANDB_MODE="disabled"))
  wall = time.perf_counter() - t0
  with open(kept, "w") as f:
    f.write(repr(wall))
  return wall


def outcome(workdir: str) -> dict:
  """A finished run's claims, design fit and compute (FLOPs of its models)."""
  with open(os.path.join(workdir, "results.csv")) as f:
    rows = list(csv.DictReader(f))
  with open(os.path.join(workdir, "claims.json")) as f:
    claims = [c["holds"] for c in json.load(f)]
  with open(os.path.join(workdir, "config.json")) as f:
    c = json.load(f)
  depths = sorted(int(d) for d in c["grid"]["depth"])  # the grid's, measured or not: the
  # study's own fit (sweep/design_rounds.law_cells), whose depths are adjacent as on the grid
  cells = []
  for d in depths:
    here = [r for r in rows if int(r["depth"]) == d]
    cells.append(cell_law.Cell(
        x=float(d), y=tuple(math.log2(max(int(r["n_star"]), 1)) for r in here),
        censored=tuple(int(r["n_star"]) >= int(r["measured_length"] or r["length"])
                       for r in here)))
  fit = cell_law.fit(cells)
  seq = int(c["grid"]["length"][0]) + 1  # k-hop's prefix token
  flops = sum(plan.step_flops(int(r["depth"]), int(r["width"]), 1, seq,
                              c["train"]["batch_size"]) * c["train"]["steps"] for r in rows)
  return dict(models=len(rows), claims=claims, slope=fit.get("slope"), ci95=fit.get("ci95"),
              flops=flops, seeds_per_depth=[len(x.y) for x in cells])


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--seeds", type=int, nargs="+", default=[10, 20],
                  help="each seed set's first seed (4 consecutive grid seeds)")
  ap.add_argument("--workdir", default="runs/design_live")
  ap.add_argument("--json", default=None)
  args = ap.parse_args(argv)
  out = []
  for first in args.seeds:
    seeds = list(range(first, first + 4))
    got = {}
    for kind in ("grid", "adaptive"):
      w = os.path.join(args.workdir, f"s{first}-{kind}")
      wall = train(w, seeds, kind)
      got[kind] = dict(outcome(w), wall_s=wall)
    g, a = got["grid"], got["adaptive"]
    lo, hi = g["ci95"] or (math.nan, math.nan)
    got.update(seeds=seeds, claims_equal=a["claims"] == g["claims"],
               slope_in_grid_ci=bool(lo <= (a["slope"] or math.nan) <= hi),
               compute_share=a["flops"] / g["flops"], wall_ratio=a["wall_s"] / g["wall_s"])
    out.append(got)
    print(f"seeds {seeds}: grid slope {g['slope']:.3f} [{lo:.3f}, {hi:.3f}], claims "
          f"{g['claims']}, {g['wall_s']:.0f} s; adaptive slope {a['slope']:.3f}, claims "
          f"{a['claims']}, seeds per depth {a['seeds_per_depth']}, {a['wall_s']:.0f} s; "
          f"compute {got['compute_share']:.2f} of the grid's; claims equal "
          f"{got['claims_equal']}, slope in the grid's interval {got['slope_in_grid_ci']}",
          flush=True)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(out, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
