"""Train one group of models (one compiled program) to the end and evaluate it.

Metrics of chunk c are read on the host only after chunk c+1 is dispatched, so the
device never waits for Python. Progress bar: models, steps, steps/s, ETA.
Imports core/, model/ and tasks/; writes no files.
"""
from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np
from tqdm.auto import tqdm

from depthscale.core import ensemble, metrics, train


@dataclasses.dataclass
class GroupResult:
  rows: list[dict]                 # one per model, in spec order
  curves: dict[str, np.ndarray]    # name -> [steps, M]
  per_position_acc: np.ndarray     # [M, T] held-out


def train_group(task, specs, tcfg: train.TrainConfig, *, steps_per_call: int = 100,
                eval_size: int = 1000, pos: str = "learned", progress: bool = True,
                desc: str = "group") -> GroupResult:
  if tcfg.total_steps % steps_per_call:
    raise ValueError(f"total_steps ({tcfg.total_steps}) must be a multiple of "
                     f"steps_per_call ({steps_per_call})")
  length = tcfg.length
  cfg = ensemble.group_config(specs, max_len=task.seq_len(length),
                              output_dim=task.output_dim(length), vocab=task.input_vocab,
                              input_dim=task.input_dim, pos=pos)
  state = train.init_state(ensemble.init_params(specs, cfg), tcfg)
  hp, arch = train.stack_hparams(specs), ensemble.stack_arch(specs, cfg)
  chunk = train.make_train_chunk(task, cfg, tcfg, steps_per_call)
  curves, pending = [], None
  bar = tqdm(total=tcfg.total_steps, desc=f"{desc} ({len(specs)} models)", unit="step",
             disable=not progress, leave=False)
  start = time.perf_counter()
  for _ in range(tcfg.total_steps // steps_per_call):
    state, m = chunk(state, hp, arch)       # dispatched; runs while we read the last one
    if pending is not None:
      curves.append(jax.device_get(pending))
      bar.update(steps_per_call)
    pending = m
  curves.append(jax.device_get(pending))
  bar.update(steps_per_call)
  bar.close()
  train_s = time.perf_counter() - start
  batch = metrics.held_out(task, length, eval_size)
  res = metrics.make_evaluate(task, cfg)(state.params, arch, batch)
  mask_T = np.asarray(batch.mask).any(0)
  curves = {k: np.concatenate([c[k] for c in curves]) for k in curves[0]}
  rows = metrics.summarize(res, mask_T)
  for spec, row, m in zip(specs, rows, range(len(specs))):
    row.update(task=task.name, depth=spec.depth, width=spec.width, heads=spec.heads,
               seed=spec.seed, lr=spec.lr, repeats=spec.repeats, length=length,
               final_loss=float(curves["loss"][-1, m]), steps=tcfg.total_steps,
               frozen=bool(np.asarray(state.frozen)[m]), train_s=train_s)
  acc = np.asarray(jax.device_get(res["per_position_acc"]))[:, mask_T]
  return GroupResult(rows=rows, curves=curves, per_position_acc=acc)
