"""The equivalence tests' independent reference: one model trained by itself, computed once
per test process for each (task, model, train config, model options).

A lone model is a padded group of one model (the plain vmapped step, no compaction, no
queue, no stopping rule), trained from step 0 in chunks of `chunk` steps. Its run is kept
and extended: asking for the same model at 20 steps and then at 60 trains it 60 steps in
all, and its state is kept at every chunk boundary, so the held-out row at any of them is
one evaluation. One compiled program serves every lone model of one shape (seeds and
learning rates are data), where each test used to compile its own per (model, steps).
The group under test is never cached here: only the reference it is compared with.
"""
from __future__ import annotations

import jax
import numpy as np

from depthscale.core import ensemble, metrics, program, train

_CHUNKS: dict = {}     # (task, cfg, tcfg, chunk, x64) -> compiled chunk of `chunk` steps
_RUNS: dict = {}       # (task, spec, tcfg, options, chunk, x64) -> _Run


class _Run:
  """One lone model's training so far: losses and stages per step, and its host state at
  every multiple of `chunk` steps."""

  def __init__(self, task, spec, tcfg, options, chunk):
    self.task, self.spec, self.chunk = task, spec, chunk
    self.tcfg = tcfg
    self.cfg = program.model_config(task, [spec], self.tcfg, options)
    self.hp = train.stack_hparams([spec])
    self.arch = ensemble.stack_arch([spec], self.cfg)
    self.state = train.init_state(ensemble.init_params([spec], self.cfg), self.tcfg)
    key = (metrics.task_id(task), self.cfg, self.tcfg, chunk, metrics.float64_on())
    if key not in _CHUNKS:  # compiled here: it outlives jax.clear_caches (conftest)
      _CHUNKS[key] = program.make_train_chunk(task, self.cfg, self.tcfg, chunk).lower(
          self.state, self.hp, self.arch).compile()
    self.fn = _CHUNKS[key]
    self.saved = {0: jax.device_get(self.state)}
    self.loss, self.stage = [], []

  def to(self, steps: int):
    if steps % self.chunk:
      raise ValueError(f"{steps} steps is not a multiple of the chunk ({self.chunk})")
    while len(self.loss) < steps:
      self.state, m = self.fn(self.state, self.hp, self.arch)  # the state is donated
      self.loss.extend(np.asarray(m["loss"])[:, 0])
      self.stage.extend(np.asarray(m["stage"])[:, 0])
      self.saved[len(self.loss)] = jax.device_get(self.state)
    return self

  def row(self, steps: int, size: int):
    """The held-out row (metrics.summarize) after `steps` steps, on `size` examples."""
    self.to(steps)
    batch = metrics.held_out_set(self.task, self.tcfg.length, size)
    res = metrics.evaluator(self.task, self.cfg)(self.saved[steps].params, self.arch, batch)
    return metrics.summarize(res, np.asarray(batch.mask).any(0))[0]


def run(task, spec, tcfg, steps: int, options: dict | None = None, chunk: int = 5) -> _Run:
  """The lone run of `spec` (task, train config and model options as the group's),
  trained at least `steps` steps: `.loss[:steps]`, `.stage[:steps]`, `.saved[steps]`,
  `.row(steps, size)`. Call inside the same `jax.enable_x64` setting as the group."""
  options = dict(options or {})
  tcfg = train.TrainConfig(**{**tcfg.__dict__, "layout": "pad", "profile": ()})
  key = (metrics.task_id(task), spec, tcfg, tuple(sorted(options.items())), chunk,
         metrics.float64_on())
  if key not in _RUNS:
    _RUNS[key] = _Run(task, spec, tcfg, options, chunk)
  return _RUNS[key].to(steps)


def curves(task, spec, tcfg, steps: int, options: dict | None = None, chunk: int = 5):
  """(losses [steps], stages [steps]) of the lone model's first `steps` steps."""
  r = run(task, spec, tcfg, steps, options, chunk)
  return np.asarray(r.loss[:steps]), np.asarray(r.stage[:steps])
