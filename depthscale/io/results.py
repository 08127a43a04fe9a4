"""Files a sweep leaves in its workdir: atomic writes, per-group results, results.csv.

Every write goes to a temporary file in the same directory, then os.replace: a reader
(or a killed writer) never sees half a file. Imports nothing from depthscale.
"""
from __future__ import annotations

import csv
import glob
import io
import json
import os
import tempfile

import numpy as np

COLUMNS = ["task", "depth", "width", "heads", "seed", "lr", "length", "repeats", "n_star",
           "final_loss", "eval_loss", "seq_acc", "steps", "frozen", "group", "model",
           "k_star", "level_acc", "compile_s", "train_s"]


def write_atomic(path: str, text: str) -> None:
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".tmp-")
  with os.fdopen(fd, "w") as f:
    f.write(text)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)


def group_path(workdir: str, group_id: str) -> str:
  return os.path.join(workdir, "groups", f"{group_id}.json")


def write_group(workdir, group_id, rows, curves, per_position_acc, log_every=10) -> None:
  """groups/<id>.json: rows, curves (every `log_every` steps) and held-out accuracy."""
  steps = np.arange(log_every, curves["loss"].shape[0] + 1, log_every)
  data = {"rows": rows,
          "curves": {"step": steps.tolist(),
                     **{k: v[steps - 1].T.tolist() for k, v in curves.items()}},
          "per_position_acc": np.asarray(per_position_acc).tolist()}
  write_atomic(group_path(workdir, group_id), json.dumps(data))


def read_groups(workdir: str) -> dict[str, dict]:
  out = {}
  for p in sorted(glob.glob(os.path.join(workdir, "groups", "*.json"))):
    with open(p) as f:
      out[os.path.basename(p)[:-5]] = json.load(f)
  return out


def write_results_csv(workdir: str, rows: list[dict]) -> str:
  buf = io.StringIO()
  w = csv.DictWriter(buf, COLUMNS, extrasaction="ignore")
  w.writeheader()
  w.writerows(rows)
  path = os.path.join(workdir, "results.csv")
  write_atomic(path, buf.getvalue())
  return path
