"""What a task's sampler costs beside training (`depthscale tasks check`): the median time
of one jitted `sample` against one training step of a small model (depth 2, width 64) at
the same batch and length, on the first local device. A training step samples its own
batch, so a sampler near the step's time dominates it and starves the accelerator.
"""
from __future__ import annotations

import statistics
import time

import jax
import numpy as np

from depthscale.core import program, train
from depthscale.core.ensemble import ModelSpec

SMALL = ModelSpec(depth=2, width=64, heads=4)
DOMINATES = 0.5   # sampling above this fraction of a whole step is reported
STEPS = 10        # steps per timed dispatch
REPEATS = 5       # timed dispatches (the median is kept)


def _median_s(fn, repeats: int = REPEATS) -> float:
  fn()  # compile and warm up
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
  return statistics.median(times)


def measure(task, length: int, batch_size: int) -> dict:
  """{"sample_s", "step_s", "fraction"}: seconds per sampled batch and per training step
  of SMALL (which includes its own sampling), and their ratio."""
  device = jax.local_devices()[0]
  sample = jax.jit(lambda k: task.sample(k, batch_size, length))
  key, calls = jax.random.key(0), [0]

  def sample_steps():
    for _ in range(STEPS):
      calls[0] += 1
      out = sample(jax.random.fold_in(key, calls[0]))
    jax.block_until_ready(out)

  sample_s = _median_s(sample_steps) / STEPS
  tcfg = train.TrainConfig(batch_size=batch_size, length=length, total_steps=10**6)
  prog = program.build(program.Blueprint.of(task, [SMALL], tcfg, None, STEPS), [device])
  held = [prog.state]

  def train_steps():
    held[0], metrics = prog.run(held[0], prog.hp, prog.arch, np.int32(STEPS))
    jax.block_until_ready(metrics)

  step_s = _median_s(train_steps) / STEPS
  return dict(sample_s=sample_s, step_s=step_s, fraction=sample_s / step_s)
