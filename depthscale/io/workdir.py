"""A workdir's on-disk layout, and the one reader and writer of it: config.json (the
study), plan.json (its groups, written once), groups/<id>.json (one finished group),
checkpoints/<id>/ (where a group's checkpointer lives), results.csv (every row).

Every write goes to a temporary file in the same directory, then os.replace: a reader
(or a killed writer) never sees half a file. A group file that does not parse, or that
another version of depthscale wrote (its "format"), is reported in one line and left as
it is, never rebuilt or overwritten. Needs no JAX; imports depthscale.errors only
(leases keep their own files, io/leases.py).
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


def check(workdir: str) -> None:
  """A one-line UserError unless `workdir` is (or can be created as) a writable
  directory whose group files all read; writes nothing that stays."""
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise UserError(f"--workdir {workdir!r} is a file; give a directory")
  parent = os.path.abspath(workdir)
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    raise UserError(f"--workdir {workdir!r}: {parent!r} is a file; give a directory path")
  try:
    os.rmdir(tempfile.mkdtemp(dir=parent, prefix=".depthscale-check-"))
  except OSError as e:
    raise UserError(f"--workdir {workdir!r}: cannot write in {parent!r} ({e.strerror}); "
                    "choose another --workdir") from None
  if os.path.isdir(workdir):
    read_groups(workdir)  # corrupt or foreign group files: refuse now


def read_json(workdir: str, name: str) -> dict | None:
  """A JSON file of the workdir (config.json, plan.json, ...), or None if absent."""
  path = os.path.join(workdir, name)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def read_config(workdir: str) -> dict | None:
  """config.json as saved by the first run (None: not a workdir yet)."""
  return read_json(workdir, "config.json")


def write_config(workdir: str, text: str) -> None:
  os.makedirs(workdir, exist_ok=True)
  write_atomic(os.path.join(workdir, "config.json"), text)


def read_plan(workdir: str) -> dict | None:
  """plan.json (None: no worker has frozen the plan yet); a one-line UserError if it
  does not parse."""
  try:
    return read_json(workdir, "plan.json")
  except (ValueError, UnicodeDecodeError) as e:
    raise UserError(f"{workdir}/plan.json does not match the study ({e}); use a new "
                    "--workdir") from None


def write_plan_once(workdir: str, text: str) -> bool:
  """Write plan.json unless a plan is there (the first writer wins: a hard link of a
  complete temporary file); True if this call wrote it."""
  fd, tmp = tempfile.mkstemp(dir=workdir, prefix=".plan-")
  with os.fdopen(fd, "w") as f:
    f.write(text)
  try:
    os.link(tmp, os.path.join(workdir, "plan.json"))
    return True
  except FileExistsError:
    return False
  finally:
    os.unlink(tmp)


def group_path(workdir: str, group_id: str) -> str:
  return os.path.join(workdir, "groups", f"{group_id}.json")


def is_done(workdir: str, group_id: str) -> bool:
  """True once the group's results are written (a group is finished exactly then)."""
  return os.path.exists(group_path(workdir, group_id))


def checkpoint_dir(workdir: str, group_id: str) -> str:
  return os.path.abspath(os.path.join(workdir, "checkpoints", group_id))


def checkpoint_step(workdir: str, group_id: str) -> int | None:
  """The step of the group's latest checkpoint on disk, or None."""
  d = checkpoint_dir(workdir, group_id)
  steps = [int(n) for n in os.listdir(d) if n.isdigit()] if os.path.isdir(d) else []
  return max(steps) if steps else None


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
  """{group id: its file, checked}, in id order."""
  return {os.path.basename(p)[:-5]: read_group(p)
          for p in sorted(glob.glob(os.path.join(workdir, "groups", "*.json")))}


def merge_results(workdir: str) -> list[dict]:
  """Every finished group's rows, sorted, written to results.csv; returns them."""
  rows = [r for g in read_groups(workdir).values() for r in g["rows"]]
  rows.sort(key=lambda r: (r["length"], r["depth"], r["repeats"], r["width"], r["lr"],
                           r["seed"]))
  write_results_csv(workdir, rows)
  return rows


def write_results_csv(workdir: str, rows: list[dict]) -> str:
  buf = io.StringIO()
  w = csv.DictWriter(buf, COLUMNS, extrasaction="ignore")
  w.writeheader()
  w.writerows(rows)
  path = os.path.join(workdir, "results.csv")
  write_atomic(path, buf.getvalue())
  return path


def parse_cell(v: str):
  """A results.csv cell back to bool, int, float, None or str."""
  if v in ("True", "False", ""):
    return {"True": True, "False": False, "": None}[v]
  for kind in (int, float):
    try:
      return kind(v)
    except ValueError:
      pass
  return v


def read_results_csv(workdir: str) -> list[dict] | None:
  """results.csv's rows, typed (None: no results.csv)."""
  path = os.path.join(workdir, "results.csv")
  if not os.path.exists(path):
    return None
  with open(path, newline="") as f:
    return [{k: parse_cell(v) for k, v in r.items()} for r in csv.DictReader(f)]
