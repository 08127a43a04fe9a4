"""What study files share: their `:a,b` arguments checked, and the variants every study
has (`smoke`, a couple of CPU minutes; `cpu_scale`, the study's own sizes on a CPU)."""
from __future__ import annotations

import ml_collections

from depthscale.config.base import ConfigError


def study_args(arg: str | None, valid: tuple[str, ...],
               exclusive: tuple[tuple[str, ...], ...] = ()) -> set[str]:
  """The arguments of `--config file.py:a,b` as a set, each checked against the study's
  `valid` ones; at most one of each `exclusive` tuple. One-line ConfigError otherwise."""
  args = [a.strip() for a in (arg or "").split(",") if a.strip()]
  for a in args:
    if a not in valid:
      raise ConfigError(f"unknown study argument {a!r}; valid: {', '.join(valid)} "
                        "(comma-separated)")
  for group in exclusive:
    both = [a for a in group if a in args]
    if len(both) > 1:
      raise ConfigError(f"study arguments {' and '.join(both)} contradict each other; "
                        "give one")
  return set(args)


def smoke(c: ml_collections.ConfigDict, length: int = 16, depths=(1, 2, 3),
          width: int = 32) -> ml_collections.ConfigDict:
  """The same study shrunk to a couple of CPU minutes: 3 depths x 2 seeds at one width
  and one length, 300 steps, checkpointed every 60 steps."""
  c.grid.depth, c.grid.width, c.grid.seed = list(depths), [width], [0, 1]
  c.grid.length, c.grid.lr = [length], [3e-3]
  c.model.heads = min(c.model.heads, 4)
  c.model.compute_dtype = "float32"  # CPU scale: bf16 matmuls are slow on a CPU
  c.model.head_dim = 0
  c.train.update(dict(batch_size=16, steps=300, steps_per_call=20, warmup=0))
  if c.train.curriculum == "fixed":
    c.train.steps_per_stage = 60
  c.checkpoint_every = 60
  c.eval.size = 256
  c.name += "-smoke"
  return c


def cpu_scale(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """What every study's `:cpu` variant shares (its sizes are the study's own): float32,
  heads from model.heads (not head_dim), the name tagged -cpu."""
  c.model.compute_dtype = "float32"  # bf16 matmuls are slow on a CPU
  c.model.head_dim = 0
  c.name += "-cpu"
  return c
