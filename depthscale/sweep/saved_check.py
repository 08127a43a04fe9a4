"""Is a restored checkpoint of a group consistent with itself and its group? A checkpoint
of the current shape restores whatever its arrays hold; one whose slot table, curves or
stop state cannot be the group's at that step (a damaged file, a bad copy, a hand edit)
is refused here, so that restore falls back to the one before (io/checkpoint.py) instead
of training on from it; and which older payload shapes still restore. Pure numpy on the
payload sweep/group_run.py saves."""
from __future__ import annotations

import numpy as np

from depthscale.core import stopping
from depthscale.sweep import slots as slots_lib


def problem(saved: dict, step: int, n: int, total: int, n_stages: int,
            static: bool) -> str | None:
  """What is wrong with `saved` (GroupRun.payload's tree, restored at group step `step`
  of a group of `n` models, `total` steps, `n_stages` curriculum stages); None: nothing.
  `static`: every model trains from step 0 to the end (no stopping rule, no queue)."""
  for check in (_models, _curves, _stop, _table):
    why = check(saved, step, n, total, n_stages, static)
    if why:
      return why
  return None


def older_shapes(like: dict) -> list[dict]:
  """The payload shapes earlier versions saved for a group whose payload is `like`:
  before length buckets (99fdd67, 2026-11-27) a curriculum's curves had no `paid` (its
  steps paid the full length)."""
  if "paid" not in like["curves"]:
    return []
  return [dict(like, curves={k: v for k, v in like["curves"].items() if k != "paid"})]


def upgraded(saved: dict, like: dict) -> dict:
  """`saved` (of `like`'s shape or an older one) in `like`'s shape: a missing `paid` curve
  all NaN, which group_result.lengths_paid reads as the full length."""
  if "paid" in like["curves"] and "paid" not in saved["curves"]:
    saved["curves"]["paid"] = np.full_like(like["curves"]["paid"], np.nan)
  return saved


def _models(saved, step, n, total, n_stages, static):
  st = saved["models"]
  own, stage = np.asarray(st.step), np.asarray(st.stage)
  if np.any(own < 0) or np.any(own > step) or (static and np.any(own != step)):
    return f"model steps {sorted(set(own.tolist()))[:4]} at group step {step}"
  if np.any(stage < 0) or np.any(stage >= n_stages):
    return f"curriculum stages outside 0..{n_stages - 1}"
  return None


def _curves(saved, step, n, total, n_stages, static):
  curves = saved["curves"]
  stage = np.asarray(curves["stage"], np.float64)
  if stage.shape != (total, n):
    return f"a stage curve of shape {stage.shape}, not ({total}, {n})"
  seen = stage[np.isfinite(stage)]
  if np.any(seen < 0) or np.any(seen >= n_stages) or np.any(seen != np.round(seen)):
    return "stage curve values that are no curriculum stage"
  if np.any(np.isfinite(stage[step:])):
    return f"curve values past the checkpoint's step {step}"
  if static and not np.all(np.isfinite(stage[:step])):
    return f"curves missing steps before {step}"
  return None


def _stop(saved, step, n, total, n_stages, static):
  st = stopping.StopState.from_tree(saved["stop"])
  at, reason = np.asarray(st.stopped_at), np.asarray(st.reason)
  if at.shape != (n,) or np.any(at < -1) or np.any(at > min(step, total)):
    return f"stop steps outside -1..{step}"
  if np.any(reason < 0) or np.any(reason >= len(stopping.REASONS)):
    return "stop reasons that are none of " + ", ".join(stopping.REASONS)
  if np.any((at < 0) != (reason == 0)):
    return "models stopped without a reason (or running with one)"
  return None


def _table(saved, step, n, total, n_stages, static):
  if "table" not in saved:
    return None
  table = slots_lib.SlotTable.from_tree(saved["table"])
  held = table.holder[table.holder >= 0]
  if np.any((table.holder < 0) & (table.holder != slots_lib.IDLE)) or np.any(held >= n):
    return f"slot holders outside 0..{n - 1}"
  if len(set(held.tolist())) < held.size:
    return "a model in two slots"
  if np.any(table.entered < -1) or np.any(table.entered > step) or np.any(
      table.entered[held] < 0):
    return f"slot entries outside -1..{step} (or a model in a slot it never entered)"
  built = [int(i) for i in np.asarray(saved["built"]) if i >= 0]
  if any(i >= n for i in built) or len(set(built)) < len(built):
    return "a program built of models that are not the group's"
  return None
