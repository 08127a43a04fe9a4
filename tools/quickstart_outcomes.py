"""The integer outcomes README promises for `make run`, read from a workdir's results.csv
and claims.json: best n* per depth, hardest k solved per depth (best seed), each claim's
verdict. One line:  python tools/quickstart_outcomes.py WORKDIR
"""
from __future__ import annotations

import csv
import json
import os
import sys


def outcomes(workdir: str) -> str:
  with open(os.path.join(workdir, "results.csv")) as f:
    rows = list(csv.DictReader(f))
  depths = sorted({int(r["depth"]) for r in rows})
  best = lambda col, d: max(int(r[col]) for r in rows if int(r["depth"]) == d)
  with open(os.path.join(workdir, "claims.json")) as f:
    verdicts = [{True: "holds", False: "fails", None: "undecided"}[c["holds"]]
                for c in json.load(f)]
  return (f"best n* {', '.join(str(best('n_star', d)) for d in depths)}; hardest k "
          f"{', '.join(str(best('k_star', d)) for d in depths)} (depths "
          f"{', '.join(map(str, depths))}); claims {', '.join(verdicts)}")


def main(argv: list[str]) -> int:
  if len(argv) != 1:
    print("usage: python tools/quickstart_outcomes.py WORKDIR", file=sys.stderr)
    return 2
  missing = [f for f in ("results.csv", "claims.json")
             if not os.path.isfile(os.path.join(argv[0], f))]
  if missing:
    print(f"quickstart_outcomes: {argv[0]} has no {' or '.join(missing)}: give the workdir "
          "of a finished `make run` (runs/quickstart)", file=sys.stderr)
    return 2
  print(outcomes(argv[0]))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
