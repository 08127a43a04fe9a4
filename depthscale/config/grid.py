"""The task a study trains on and the grid of models swept over it: their fields and
their checks (sizes as distinct ints, seeds within JAX's 32-bit keys, learning rates
finite, lengths the task accepts). Valid task names are the tasks package's."""
from __future__ import annotations

import math

import ml_collections

from depthscale import tasks
from depthscale.config.base import ConfigError, int_list
from depthscale.errors import UserError

SEED_LIMIT = 2**32  # PRNG keys keep a seed's low 32 bits: seeds 0 and 2^32 are one model


def add(c: ml_collections.ConfigDict) -> None:
  c.task = "word_problem"  # a built-in task's name, or `file.py:Class` (tasks/sources.py)
  c.task_options = ml_collections.ConfigDict()
  c.grid = ml_collections.ConfigDict(dict(depth=[2], width=[64], seed=[0], lr=[1e-3],
                                          length=[16], repeats=[1]))


def make_task(c):
  """The study's task, made from task and task_options."""
  try:
    return tasks.make(c.task, **dict(c.task_options))
  except UserError as e:
    raise ConfigError(f"task: {e}") from None


def check(c) -> tuple[list[int], list[int]]:
  """The grid's lists checked; returns (widths, lengths)."""
  _, widths, _, lengths, _ = (int_list(c, "depth"), int_list(c, "width"),
                              int_list(c, "seed", lo=0, hi=SEED_LIMIT),
                              int_list(c, "length"), int_list(c, "repeats"))  # in this order
  lrs = c.grid.lr
  if not isinstance(lrs, (list, tuple)) or not lrs:
    raise ConfigError("grid.lr: must be a non-empty list")
  for v in lrs:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
      raise ConfigError(f"grid.lr: {v!r} is not a positive finite number")
  if len(set(lrs)) != len(lrs):
    raise ConfigError(f"grid.lr: {list(lrs)} lists a value twice; give each once")
  return widths, lengths


def check_lengths(task, lengths) -> None:
  """Every grid.length one the task can make examples of."""
  for n in lengths:
    try:
      task.check_length(n)
    except UserError as e:
      raise ConfigError(f"grid.length: {e}") from None
