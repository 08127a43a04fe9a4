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


if __name__ == "__main__":
  print(outcomes(sys.argv[1]))
