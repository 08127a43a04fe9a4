"""The task a study trains on and the grid of models swept over it: their fields and
their checks (sizes as distinct ints, seeds within JAX's 32-bit keys, learning rates
finite, lengths the task accepts). Valid task names are the tasks package's."""
from __future__ import annotations

import math

import ml_collections

from depthscale import tasks
from depthscale.tasks import contract
from depthscale.config.base import ConfigError, int_list
from depthscale.config.fields import field, section
from depthscale.errors import UserError

SEED_LIMIT = 2**32  # PRNG keys keep a seed's low 32 bits: seeds 0 and 2^32 are one model


def add(c: ml_collections.ConfigDict) -> None:
  field(c, "task", "word_problem",
        "the task trained on: a built-in task's name (`depthscale tasks list`), or "
        "`file.py:Class` (tasks/sources.py), read from the study file's directory")
  field(c, "task_options", ml_collections.ConfigDict(),
        "the task's options, a dict of option names to values, e.g. {'group': 'A5'}")
  field(c, "task_digest", "",
        "set by `run` in config.json: a digest of the task's source (tasks.digest)")
  section(c, "grid", "the models swept: every combination of these lists is one model")
  field(c, "grid.depth", [2], "layers (distinct ints >= 1)")
  field(c, "grid.width", [64], "model widths (distinct ints >= 1; each divisible by "
        "model.heads, or by model.head_dim when it is > 0)")
  field(c, "grid.seed", [0], "seeds (distinct ints in [0, 2^32): JAX keeps a seed's low "
        "32 bits)")
  field(c, "grid.lr", [1e-3], "Adam learning rates (distinct positive numbers)")
  field(c, "grid.length", [16], "task lengths trained at (distinct ints the task accepts)")
  field(c, "grid.repeats", [1], "times the block of `depth` layers is applied "
        "(distinct ints >= 1; > 1: a looped model)")
  field(c, "grid.lr_width", 0,
        "> 0: each grid.lr is the rate at this width, and a model of width w trains at "
        "lr * lr_width / w (Adam's rate scaled like 1/width, as muP-style recipes do), so a "
        "width sweep does not give its widest models a rate tuned for its narrowest; 0: off")


def make_task(c):
  """The study's task, made from task and task_options."""
  opts = c.task_options
  if not hasattr(opts, "items") or not all(isinstance(k, str) for k in opts.keys()):
    raise ConfigError(f"task_options: {opts!r} is not a dict of option names to values; "
                      "give e.g. {'group': 'A5'} (or {} for none)")
  try:
    return tasks.make(c.task, **dict(opts))
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
  base = c.grid.get("lr_width", 0)
  if isinstance(base, bool) or not isinstance(base, int) or base < 0:
    raise ConfigError(f"grid.lr_width: {base!r} is not a width (an int >= 1) or 0 (off)")
  return widths, lengths


def check_lengths(task, lengths) -> None:
  """Every grid.length one the task can make examples of, and the task's structural
  contract at each (tasks/contract.py), before anything is written or compiled."""
  for n in lengths:
    try:
      task.check_length(n)
    except ValueError as e:  # a UserError, or the ValueError base.py asks a task for
      raise ConfigError(f"grid.length: {' '.join(str(e).split())}") from None
    except Exception:  # noqa: BLE001 -- a broken check_length: named by structural below
      break
  problems = contract.structural(task, lengths)
  if problems:
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    raise ConfigError(f"task {task_label(task)} breaks the task contract: {problems[0]}{more}; "
                      "`depthscale tasks check` lists every check")


def task_label(task) -> str:
  name = getattr(task, "name", None)
  return name if isinstance(name, str) else type(task).__name__
