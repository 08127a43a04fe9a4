"""A workdir's on-disk layout, and the one reader and writer of it: config.json (the
study), plan.json (its groups, written once), groups/<id>.json (one finished group),
checkpoints/<id>/ (where a group's checkpointer lives); results.csv (every row) is
io/results_csv.py's.

Every write goes through io/atomic.py: a reader (or a killed writer) never sees half a
file. Results are the plan's: only groups/<id>.json of a group in plan.json counts, holding
exactly that group's models, so no model counts twice. A damaged or foreign file is one
line naming it, left as it is, never rebuilt. Needs no JAX (the report reads through it).
"""
from __future__ import annotations

import glob
import json
import os
import sys
import tempfile

import numpy as np

from depthscale.errors import UserError
from depthscale.io import atomic, places

# Version of the groups/<id>.json layout and of what its numbers mean. 2: weight decay by
# role (earlier files, without "format", decayed LayerNorm and biases in the layer stack).
FORMAT = 2


SUBDIRS = ("groups", "leases", "checkpoints", "plots")  # directories, never files
FILES = ("config.json", "plan.json", "results.csv", "report.md", "fits.json", "claims.json")


def entries(directory: str) -> list[str]:
  """The names in `directory` (none if it is absent), sorted, less the probes of peers
  checking that it is writable: a probe comes and goes while another worker lists it."""
  names = os.listdir(directory) if os.path.isdir(directory) else []
  return sorted(n for n in names if not n.startswith(places.PROBE))


def check(workdir: str) -> None:
  """A one-line UserError unless `workdir` is (or can be created as) a writable
  directory whose group files all read; writes nothing that stays."""
  places.check_path(workdir)
  places.check_link(workdir)
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise UserError(f"--workdir {workdir!r} is a file; give a directory")
  parent = os.path.abspath(workdir)
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    raise UserError(f"--workdir {workdir!r}: {parent!r} is a file; give a directory path")
  try:
    os.rmdir(tempfile.mkdtemp(dir=parent, prefix=places.PROBE))
  except OSError as e:
    raise UserError(f"--workdir {workdir!r}: cannot write in {parent!r} ({e.strerror}); "
                    "choose another --workdir") from None
  if os.path.isdir(workdir):
    check_contents(workdir)
    theirs = [n for n in os.listdir(workdir) if not n.startswith((atomic.PREFIX, places.PROBE))]
    if read_config(workdir) is None and theirs:  # `run` would write here (a peer's
      # config.json half written, a temporary of atomic.write, is not someone else's file)
      raise UserError(f"{workdir} holds files but is not a depthscale workdir (no "
                      "config.json); give a new or empty --workdir (nothing of yours is "
                      "overwritten)")
    ckpts = os.path.join(workdir, "checkpoints")  # each group's too: found now, not at a
    places.check_writable([os.path.join(workdir, d) for d in SUBDIRS] + [  # save's end
        os.path.join(ckpts, n) for n in entries(ckpts)])


def check_contents(workdir: str) -> None:
  """Refuse (one line naming the file) a damaged or foreign file the workdir's readers
  would meet later: config.json, plan.json, group files, lease records, a file where a
  directory goes; and results without the plan they were trained in."""
  from depthscale.io import leases
  for d in (os.path.join(workdir, d) for d in SUBDIRS):
    if os.path.exists(d) and not os.path.isdir(d):
      raise UserError(f"{d} is a file, where depthscale keeps a directory; move it aside")
  for f in (os.path.join(workdir, f) for f in FILES):
    if os.path.isdir(f):
      raise UserError(f"{f} is a directory, where depthscale writes a file; move it aside")
  read_config(workdir)
  groups = {os.path.basename(p)[:-5]: read_group(p)  # corrupt or foreign: refuse now
            for p in sorted(glob.glob(os.path.join(workdir, "groups", "*.json")))}
  leases.check_records(workdir)
  ckpts = os.path.join(workdir, "checkpoints")
  for n in entries(ckpts):
    if not os.path.isdir(os.path.join(ckpts, n)):
      raise UserError(f"{os.path.join(ckpts, n)} is a file, where a group's checkpoints go; "
                      "move it aside")
  plan = plan_groups(workdir)
  if plan is None and (groups or entries(ckpts)):
    raise UserError(f"{workdir}/plan.json is missing, but the workdir holds results or "
                    "checkpoints trained in its grouping; restore plan.json, or use a new "
                    "--workdir (a new plan would train every model again)")
  if plan is not None:
    for gid, data in groups.items():
      if gid in plan:
        check_members(group_path(workdir, gid), data, plan[gid])


def read_json(workdir: str, name: str) -> dict | None:
  """A JSON object of the workdir (config.json, plan.json, fits.json), or None if absent;
  a one-line UserError naming the file if it is damaged or not an object."""
  path = os.path.join(workdir, name)
  if not os.path.exists(path):
    return None
  try:
    with open(path) as f:
      data = json.load(f)
  except (ValueError, UnicodeDecodeError, IsADirectoryError) as e:
    raise UserError(f"{path} is damaged ({getattr(e, 'msg', e)}); restore it, or use a new "
                    "--workdir") from None
  if not isinstance(data, dict):
    raise UserError(f"{path} holds a {type(data).__name__}, not the object depthscale "
                    "writes; restore it, or use a new --workdir")
  return data


def read_config(workdir: str) -> dict | None:
  """config.json as saved by the first run (None: not a workdir yet)."""
  return read_json(workdir, "config.json")


def write_config(workdir: str, text: str) -> None:
  os.makedirs(workdir, exist_ok=True)
  atomic.write(os.path.join(workdir, "config.json"), text)


def read_plan(workdir: str) -> dict | None:
  """plan.json (None: no worker has frozen the plan yet); a one-line UserError if it
  does not parse or lacks its groups."""
  data = read_json(workdir, "plan.json")
  groups = None if data is None else data.get("groups")
  if data is not None and not (isinstance(groups, list) and all(
      isinstance(g, dict) and isinstance(g.get("id"), str) and isinstance(g.get("cells"), list)
      for g in groups)):
    raise UserError(f"{workdir}/plan.json is not a depthscale plan (no list of groups with "
                    "id and cells); restore it, or use a new --workdir")
  return data


def plan_groups(workdir: str) -> dict[str, list[str]] | None:
  """{group id: its models' keys} of plan.json and an adaptive design's rounds after it
  (io/design_files.py), in the plan's order (None: no plan)."""
  from depthscale.io import design_files
  data = read_plan(workdir)
  if data is None:
    return None
  return {**{g["id"]: list(g["cells"]) for g in data["groups"]},
          **design_files.round_groups(workdir)}


def write_plan_once(workdir: str, text: str) -> bool:
  """Write plan.json unless a plan is there (the first writer wins); True if this call
  wrote it."""
  return atomic.write_once(os.path.join(workdir, "plan.json"), text)


def group_path(workdir: str, group_id: str) -> str:
  return os.path.join(workdir, "groups", f"{group_id}.json")

def is_done(workdir: str, group_id: str) -> bool:
  """True once the group's results are written (a group is finished exactly then)."""
  return os.path.exists(group_path(workdir, group_id))


def has_training(workdir: str) -> bool:
  """True once any group of the workdir finished or saved a checkpoint."""
  return any(entries(os.path.join(workdir, d)) for d in ("groups", "checkpoints"))


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
  atomic.write(group_path(workdir, group_id), json.dumps(data))


def read_group(path: str) -> dict:
  """One group file, checked: a UserError (one line) if it is corrupt or truncated, or
  was written by another version of depthscale."""
  try:
    with open(path) as f:
      data = json.load(f)
  except (ValueError, UnicodeDecodeError) as e:
    raise UserError(f"{path} is corrupt ({getattr(e, 'msg', e)}); it is left as it is: "
                    "restore it, or move it aside to retrain that group") from None
  except OSError as e:  # a directory, a symlink to nowhere, unreadable
    raise UserError(f"{path} cannot be read as a group's results ({e.strerror}); restore "
                    "it, or move it aside to retrain that group") from None
  if not isinstance(data, dict) or not isinstance(data.get("rows"), list) or not all(
      isinstance(r, dict) for r in data["rows"]):
    raise UserError(f"{path} is not a depthscale group result; restore it, or move it "
                    "aside to retrain that group")
  if data.get("format", 1) != FORMAT:
    raise UserError(f"{path} was written by another version of depthscale (results format "
                    f"{data.get('format', 1)}; this version writes {FORMAT}): finish that "
                    "study with the version that started it, or use a new --workdir")
  for r in data["rows"]:
    bad = next((k for k, kinds in ROW_TYPES.items() if k in r
                and (isinstance(r[k], bool) or not isinstance(r[k], kinds))), None)
    if bad:
      raise UserError(f"{path}: model {r.get('model')!r} has {bad} {r[bad]!r}, not a number "
                      "(an edited file?); restore it, or move it aside to retrain that group")
  return data


# What a group file's rows hold for the fields the fits and the plan read: a model's
# shape and seed always, the others where measured (None otherwise).
_SOME = (int, type(None))
ROW_TYPES = {"depth": (int,), "width": (int,), "seed": (int,), "heads": _SOME,
             "length": _SOME, "repeats": _SOME, "steps": _SOME, "n_star": _SOME,
             "k_star": _SOME, "lr": (int, float, type(None))}


def check_members(path: str, data: dict, models: list[str]) -> None:
  """A one-line UserError unless the group file holds one row for each of `models` (the
  plan's members of its group), and nothing else."""
  got = sorted(str(r.get("model")) for r in data["rows"])
  if got != sorted(models):
    raise UserError(f"{path} holds other models than its group in plan.json ({len(got)} rows "
                    f"for {len(models)} models); move it aside to retrain that group")


def read_groups(workdir: str) -> tuple[dict[str, dict], list[str]]:
  """({group id: its file, checked} of the plan's finished groups, in the plan's order;
  the paths of group files that are not groups of the plan, which no result counts).
  Each model of the study is in exactly one plan group, so no model is counted twice."""
  plan = plan_groups(workdir) or {}
  paths = {os.path.basename(p)[:-5]: p
           for p in sorted(glob.glob(os.path.join(workdir, "groups", "*.json")))}
  out = {}
  for gid, models in plan.items():
    if gid in paths:
      out[gid] = read_group(paths[gid])
      check_members(paths[gid], out[gid], models)
  return out, sorted(p for gid, p in paths.items() if gid not in plan)


def say_ignored(stray: list[str]) -> None:
  if stray:
    names = ", ".join(os.path.basename(p) for p in stray[:3]) + (", ..." if stray[3:] else "")
    print(f"depthscale: ignoring {len(stray)} group file(s) not in this workdir's plan.json "
          f"({names}); move them out of groups/", file=sys.stderr)
