"""What a trained group leaves: one row per model (its outcomes, shape, hyperparameters,
timings), each model's curves on its own steps, and per-position held-out accuracy."""
from __future__ import annotations

import dataclasses

import numpy as np

from depthscale.core import metrics

CURVES = ("loss", "accuracy", "lr", "stage")


@dataclasses.dataclass
class GroupResult:
  rows: list[dict]                 # one per model, in spec order
  curves: dict[str, np.ndarray]    # name -> [steps, M]
  per_position_acc: np.ndarray     # [M, counted positions] held-out
  fingerprint: str = ""            # the compiled program's (core/program.py)


def rows_of(run, res, frozen, train_s: float) -> GroupResult:
  """The result of group run `run` (sweep/group_run.py) from its held-out results `res`
  (spec order) and frozen flags: models a schedule never started have empty outcomes."""
  checks, st, table = run.schedule.checks, run.st, run.table
  rows = metrics.summarize(res, run.mask_T, run.opts.threshold)
  never = [checks and table.entered[i] < 0 for i in range(run.n)]
  for i, (spec, row) in enumerate(zip(run.specs, rows)):
    last = int(st.stopped_at[i]) if checks else run.total
    if never[i]:  # halved before it trained: nothing was measured
      row = rows[i] = dict.fromkeys(row)
    if checks:
      row.update(trained_steps=last, stop=st.reason_of(i), started_at=int(table.entered[i]))
    row.update(task=run.bp.task.name, depth=spec.depth, width=spec.width, heads=spec.heads,
               seed=spec.seed, lr=spec.lr, repeats=spec.repeats, length=run.tcfg.length,
               final_loss=None if never[i] else float(run.curves["loss"][last - 1, i]),
               steps=run.total, frozen=bool(frozen[i]), devices=len(run.devices),
               models_in_program=run.m0, train_s=train_s, save_s=run.save_s,
               compile_s=run.compile_s, memory_bytes=run.prog.memory_bytes,
               probe_step_s=run.probed.step_s if run.probed is not None else None)
  acc = np.asarray(res["per_position_acc"], np.float64)[:, run.mask_T]
  acc[np.asarray(never, bool)] = np.nan
  return GroupResult(rows=rows, curves=run.curves, per_position_acc=acc,
                     fingerprint=run.fingerprint)
