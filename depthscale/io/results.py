"""Files a sweep leaves in its workdir: atomic writes, per-group results, results.csv.

Every write goes to a temporary file in the same directory, then os.replace: a reader
(or a killed writer) never sees half a file. A group file that does not parse, or that
another version of depthscale wrote (its "format"), is reported in one line and left as
it is, never rebuilt or overwritten. Imports depthscale.errors only.
"""
from __future__ import annotations

import csv
import glob
import io
import json
import os
import tempfile

import numpy as np

from depthscale.errors import UserError

# Version of the groups/<id>.json layout and of what its numbers mean. 2: weight decay by
# role (earlier files, without "format", decayed LayerNorm and biases in the layer stack).
FORMAT = 2

COLUMNS = ["task", "depth", "width", "heads", "seed", "lr", "length", "repeats", "n_star",
           "final_loss", "eval_loss", "seq_acc", "steps", "frozen", "group", "model",
           "k_star", "level_acc", "compile_s", "train_s", "save_s", "memory_bytes", "probe_step_s",
           "devices", "models_in_program"]


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
          "per_position_acc": np.asarray(per_position_acc).tolist(), "format": FORMAT}
  write_atomic(group_path(workdir, group_id), json.dumps(data))


def read_group(path: str) -> dict:
  """One group file, checked: a UserError (one line) if it is corrupt or truncated, or
  was written by another version of depthscale."""
  try:
    with open(path) as f:
      data = json.load(f)
  except (ValueError, UnicodeDecodeError) as e:
    raise UserError(f"{path} is corrupt ({getattr(e, 'msg', e)}); it is left as it is: "
                    "restore it, or move it aside to retrain that group") from None
  if not isinstance(data, dict) or "rows" not in data:
    raise UserError(f"{path} is not a depthscale group result; restore it, or move it "
                    "aside to retrain that group")
  if data.get("format", 1) != FORMAT:
    raise UserError(f"{path} was written by another version of depthscale (results format "
                    f"{data.get('format', 1)}; this version writes {FORMAT}): finish that "
                    "study with the version that started it, or use a new --workdir")
  return data


def read_groups(workdir: str) -> dict[str, dict]:
  return {os.path.basename(p)[:-5]: read_group(p)
          for p in sorted(glob.glob(os.path.join(workdir, "groups", "*.json")))}


def write_results_csv(workdir: str, rows: list[dict]) -> str:
  buf = io.StringIO()
  w = csv.DictWriter(buf, COLUMNS, extrasaction="ignore")
  w.writeheader()
  w.writerows(rows)
  path = os.path.join(workdir, "results.csv")
  write_atomic(path, buf.getvalue())
  return path
