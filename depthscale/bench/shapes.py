"""What the engine bench trains: the preset shapes, the grid of models (seeds x learning
rates) at one shape, the task, and the local devices the models are split over; with the
one-line checks of the options that choose them.
"""
from __future__ import annotations

import dataclasses

import jax

from depthscale import devices as devices_lib
from depthscale.core import ensemble
from depthscale.errors import UserError


@dataclasses.dataclass(frozen=True)
class Preset:
  """One bench shape and the step counts that keep it under ~3 minutes on 2 CPU cores."""
  width: int
  depth: int
  seq: int
  batch: int
  heads: int
  engine_k: int           # steps per engine dispatch (n of the program's loop); one per round
  sequential_steps: int   # steps per model in the sequential loop
  rounds: int             # each round: an engine dispatch, models/rounds models in turn, the peak
  models_per_chunk: int = 0  # engine default on a CPU (0 = all models vmapped at once)

  def chunk_on(self, platform: str) -> int:
    """The engine's default models per chunk on `platform`: the preset's own on a CPU, where
    chunking was measured faster for width >= 64; all models at once on an accelerator,
    where chunks of 2 left the medium preset at a third of the unchunked throughput
    (BUILD_NOTES, the first GPU check)."""
    return self.models_per_chunk if platform == "cpu" else 0


PRESETS = {
    "tiny": Preset(width=32, depth=2, seq=16, batch=16, heads=4,
                   engine_k=50, sequential_steps=100, rounds=8),
    "small": Preset(width=64, depth=2, seq=32, batch=32, heads=4,
                    engine_k=10, sequential_steps=20, rounds=8, models_per_chunk=2),
    "medium": Preset(width=256, depth=4, seq=64, batch=32, heads=4,
                     engine_k=2, sequential_steps=1, rounds=2, models_per_chunk=2),
}
NUM_MODELS = 16  # default grid: 4 seeds x the 4 learning rates
LRS = (3e-4, 1e-3, 3e-3, 1e-2)
TASK, TASK_OPTIONS = "word_problem", {"group": "A5"}
DTYPES = devices_lib.DTYPES  # the models' compute dtype (parameters stay float32)


def check_dtype(dtype: str) -> str:
  """`dtype`, or a one-line UserError listing the valid ones."""
  if dtype not in DTYPES:
    raise UserError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)}")
  return dtype


MAX_MODELS = 65536


def check_models(models: int) -> int:
  """`models`, or a one-line UserError unless it is a positive multiple of len(LRS)."""
  if isinstance(models, bool) or not isinstance(models, int) or models < len(LRS) \
      or models % len(LRS) or models > MAX_MODELS:
    raise UserError(f"--models must be a positive multiple of {len(LRS)} (seeds x the "
                     f"{len(LRS)} learning rates) up to {MAX_MODELS}, got {models!r}")
  return models


def grid_specs(p: Preset, models: int = NUM_MODELS) -> list[ensemble.ModelSpec]:
  """`models` models: seeds 0.. x the learning rates LRS, all at the preset's shape."""
  return [ensemble.ModelSpec(depth=p.depth, width=p.width, heads=p.heads, seed=s, lr=lr)
          for s in range(models // len(LRS)) for lr in LRS]


def resolve_devices(count: int | None, models: int = NUM_MODELS) -> list:
  """The first `count` local devices (all if None); a UserError if the models don't split."""
  local = jax.local_devices()
  if count is None:
    count = len(local) if models % len(local) == 0 else 1
  if not 1 <= count <= len(local):
    hint = (f"; to split a CPU into {count} devices set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={count}"
            if local[0].platform == "cpu" and count > len(local) else "")
    raise UserError(f"--devices must be between 1 and {len(local)} (the local devices), "
                     f"got {count}{hint}")
  if models % count:
    raise UserError(f"--devices must divide the {models} models evenly, got {count}")
  return local[:count]
