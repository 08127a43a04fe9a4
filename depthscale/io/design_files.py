"""An adaptive study's rounds on disk: design/round-<k>.json, one per decision, each
written once (the first writer wins, io/atomic.py) and never rewritten. A round holds the
decision's inputs (the fit, compute spent), its scores and picks, and the groups it adds
to the plan (or the reason the design stopped). plan.json stays the first round's."""
from __future__ import annotations

import glob
import json
import os
import re

from depthscale.errors import UserError
from depthscale.io import atomic

NAME = re.compile(r"round-(\d{3})\.json$")


def round_path(workdir: str, k: int) -> str:
  return os.path.join(workdir, "design", f"round-{k:03d}.json")


def write_round_once(workdir: str, k: int, record: dict) -> bool:
  """Write round k's decision unless a worker wrote it first; True if this call did."""
  os.makedirs(os.path.join(workdir, "design"), exist_ok=True)
  return atomic.write_once(round_path(workdir, k),
                           json.dumps(record, indent=1, sort_keys=True) + "\n")


def stage_round(workdir: str, k: int, record: dict) -> str:
  """Round k's temporary file alone, as a writer killed before its link leaves it (tests)."""
  return atomic._staged(round_path(workdir, k), json.dumps(record))


def read_rounds(workdir: str) -> list[dict]:
  """The rounds decided so far, in order (round 1 onward, no gaps), or a one-line error."""
  paths = sorted(p for p in glob.glob(os.path.join(workdir, "design", "round-*.json"))
                 if NAME.search(p))
  out = []
  for i, p in enumerate(paths, start=1):
    if int(NAME.search(p).group(1)) != i:
      raise UserError(f"{workdir}/design/ lacks round {i} before {os.path.basename(p)}; "
                      "restore it, or use a new --workdir")
    try:
      with open(p) as f:
        rec = json.load(f)
      if not isinstance(rec.get("groups"), list):
        raise ValueError("no list of groups")
    except (OSError, ValueError, AttributeError) as e:
      raise UserError(f"{p} is not a design round ({' '.join(str(e).split())[:120]}); "
                      "restore it, or use a new --workdir") from None
    out.append(rec)
  return out


def round_groups(workdir: str) -> dict[str, list[str]]:
  """{group id: its models' keys} of every round's groups, in the rounds' order."""
  return {g["id"]: list(g["cells"]) for r in read_rounds(workdir) for g in r["groups"]}
