"""What a trained group leaves: one row per model (its outcomes, shape, hyperparameters,
timings), each model's curves on its own steps, and per-position held-out accuracy."""
from __future__ import annotations

import dataclasses

import jax
import numpy as np

from depthscale.core import metrics, program

CURVES = ("loss", "accuracy", "lr", "stage")


@dataclasses.dataclass
class GroupResult:
  rows: list[dict]                 # one per model, in spec order
  curves: dict[str, np.ndarray]    # name -> [steps, M]
  per_position_acc: np.ndarray     # [M, counted positions] held-out
  fingerprint: str = ""            # the compiled program's (core/program.py)


def rows_of(run, res, frozen, train_s: float, full_acc=None) -> GroupResult:
  """The result of group run `run` (sweep/group_run.py) from its held-out results `res`
  (spec order) and frozen flags: models a schedule never started have empty outcomes.
  `full_acc` [M, counted positions] (growth): n* is measured on it, over the full length."""
  checks, st, table = run.schedule.checks, run.st, run.table
  rows = metrics.summarize(res, run.mask_T, run.opts.threshold)
  if full_acc is not None:  # growth: n* measured to the full length (report/fits.py)
    for row, acc in zip(rows, full_acc):
      row.update(n_star=metrics.n_star(acc, np.ones(acc.shape, bool), run.opts.threshold),
                 measured_length=run.tcfg.full_length)
  never = [checks and table.entered[i] < 0 for i in range(run.n)]
  for i, (spec, row) in enumerate(zip(run.specs, rows)):
    last = int(st.stopped_at[i]) if checks else run.total
    if never[i]:  # halved before it trained: nothing was measured
      row = rows[i] = dict.fromkeys(row)
    if checks:
      row.update(trained_steps=last, stop=st.reason_of(i), started_at=int(table.entered[i]))
    row.update(task=run.bp.task.name, depth=spec.depth, width=spec.width, heads=spec.heads,
               seed=spec.seed, lr=spec.lr, repeats=spec.repeats, length=run.tcfg.length,
               **({} if never[i] else lengths_paid(run, i, last)),
               final_loss=None if never[i] else float(run.curves["loss"][last - 1, i]),
               steps=run.total, frozen=bool(frozen[i]), devices=len(run.devices),
               models_in_program=run.m0, train_s=train_s, save_s=run.save_s,
               compile_s=run.compile_s, memory_bytes=run.prog.memory_bytes,
               probe_step_s=run.probed.step_s if run.probed is not None else None)
  acc = np.asarray(res["per_position_acc"], np.float64)[:, run.mask_T]
  acc[np.asarray(never, bool)] = np.nan
  return GroupResult(rows=rows, curves=run.curves, per_position_acc=acc,
                     fingerprint=run.fingerprint)


def full_length_acc(run):
  """With growth: each model's held-out accuracy per position over the full length (spec
  order), where its n* is measured; None without growth (stopping rules and slots are
  refused with growth: the program holds every model to the end). Evaluated in slices of
  the held-out set, each with attention arrays (examples x length^2) no larger than the
  grid length's evaluation's, the 0/1 hit counts summed exactly. Neither evaluation is in
  the memory fit (plan.fit_memory measures the training program)."""
  if run.tcfg.length_max <= run.tcfg.length:
    return None
  held = run.held_full
  mask_BxT = np.asarray(held.mask)
  ratio = -(-mask_BxT.shape[1] // run.held.mask.shape[1])  # slices whose attention arrays
  chunks = ratio * ratio                                   # match the grid length's eval
  acc = metrics.per_position_acc_sliced(
      lambda part: run.evaluate(run.state.params, run.arch, part), held, chunks)
  acc = program.take(acc, run.prog.back)
  return np.asarray(acc)[:run.n][:, mask_BxT.any(0)]


def lengths_paid(run, i: int, last: int) -> dict:
  """Model i's length accounting over its `last` steps, from its curves: the length it
  last trained at (`trained_length`), the sequence positions its steps computed
  (`positions_paid`: its length bucket's, shared with its group), those its stage needed
  (`positions_own`) and those the full length would have cost (`positions_full`)."""
  tcfg, task = run.tcfg, run.bp.task
  stages = tcfg.stages()
  stage = run.curves["stage"][:last, i].astype(np.int64)
  own = np.asarray([task.seq_len(n) for n in stages])[stage]
  full = task.seq_len(tcfg.full_length)
  paid = run.curves["paid"][:last, i] if "paid" in run.curves else np.full(last, full)
  paid = np.nan_to_num(paid, nan=full).astype(np.int64)  # buckets off: no value recorded
  return dict(trained_length=int(stages[stage[-1]]) if last else tcfg.length,
              positions_paid=int(np.sum(paid)), positions_own=int(np.sum(own)),
              positions_full=int(full * last))
