"""The bench's programs, built from a blueprint by core/program.py (the builder that trains
a sweep's group) and warmed up: the engine (all models in one program, engine_k steps per
dispatch) and the sequential baseline (one M=1 one-step program, one model at a time).
Each comes back as a timed callable and its compile seconds.
"""
from __future__ import annotations

import time
from typing import Callable

import jax
import numpy as np

from depthscale.bench.shapes import Preset
from depthscale.core import program, train


def _timed(fn: Callable[[], object]) -> float:
  t0 = time.perf_counter()
  fn()
  return time.perf_counter() - t0


def train_config(p: Preset, models_per_chunk: int = 0, layout: str = "pad"):
  """The grid's TrainConfig (enough total steps for every round; never reached)."""
  total = p.engine_k * (p.rounds + 1) + p.sequential_steps + 1
  return train.TrainConfig(batch_size=p.batch, length=p.seq, total_steps=total,
                           models_per_chunk=models_per_chunk, layout=layout)


def engine_program(task, p: Preset, specs, devices, models_per_chunk: int = 0,
                   dtype: str = "float32", layout: str = "pad", options: dict | None = None):
  """The engine's program (core/program.py), compiled: every spec in one program, engine_k
  steps a dispatch, in compute `dtype`, with the model `options` given (auto otherwise)."""
  bp = program.Blueprint.of(task, specs, train_config(p, models_per_chunk, layout),
                            dict(options or {}, compute_dtype=dtype), p.engine_k)
  return program.build(bp, devices)


def warmed_dispatch(prog, k: int) -> Callable[[], float]:
  """One warm-up dispatch of `k` steps, then (one timed dispatch of k steps -> seconds)."""
  k = np.int32(k)
  carry = [prog.run(prog.state, prog.hp, prog.arch, k)[0]]  # donated: keep the newest
  jax.block_until_ready(carry[0])

  def dispatch():
    carry[0], metrics = prog.run(carry[0], prog.hp, prog.arch, k)
    jax.block_until_ready(metrics)
  return lambda: _timed(dispatch)


def make_engine(task, p: Preset, specs, devices, log, models_per_chunk: int = 0,
                dtype: str = "float32", layout: str = "pad", name: str = "engine"):
  """Build and warm up the engine; returns (one timed dispatch of engine_k steps ->
  seconds, compile_s)."""
  prog = engine_program(task, p, specs, devices, models_per_chunk, dtype, layout)
  log(f"{name}: compiled in {prog.compile_cost_s:.1f}s; warm-up dispatch of {p.engine_k} steps")
  return warmed_dispatch(prog, p.engine_k), prog.compile_cost_s


def make_sequential(task, p: Preset, specs, log, dtype: str = "float32"):
  """Build one M=1 one-step program and warm it up; returns (run models `idx` -> seconds,
  compile_s).

  What a user would write: each model is its own group, trained by a jitted one-step
  function called `sequential_steps` times in a Python loop, then the next model.
  """
  dev = jax.local_devices()[:1]
  bp = program.Blueprint.of(task, specs[:1], train_config(p), dict(compute_dtype=dtype), 1)
  prog = program.build(bp, dev)
  models = [list(program.init_inputs([s], prog.cfg, prog.tcfg, dev)) for s in specs]
  log(f"sequential: compiled in {prog.compile_cost_s:.1f}s; warm-up step")
  one = np.int32(1)
  models[0][0], metrics = prog.run(*models[0], one)
  jax.block_until_ready(metrics)

  def run(idx):
    for i in idx:
      state, hp, arch = models[i]
      for _ in range(p.sequential_steps):
        state, metrics = prog.run(state, hp, arch, one)
      jax.block_until_ready((state, metrics))
      models[i][0] = state
  return (lambda idx: _timed(lambda: run(idx))), prog.compile_cost_s
