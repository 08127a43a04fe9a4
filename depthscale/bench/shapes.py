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
  lrs: tuple = (3e-4, 1e-3, 3e-3, 1e-2)  # the grid's learning rates (models = seeds x lrs)
  models: int = 16           # the grid's models when --models is not given
  dtype: str = "float32"     # the compute dtype when --dtype is not given
  cpu: dict | None = None    # on a CPU: these fields replaced (a size it names), else as is

  def chunk_on(self, platform: str) -> int:
    """The engine's default models per chunk on `platform`: the preset's own on a CPU, where
    chunking was measured faster for width >= 64; all models at once on an accelerator,
    where chunks of 2 left the medium preset at a third of the unchunked throughput
    (BUILD_NOTES, the first GPU check)."""
    return self.models_per_chunk if platform == "cpu" else 0


# The paper's A5 shape (Merrill & Sabharwal; experiments/a5_depth.py at depth 12): its lr,
# 3 seeds in bfloat16. On a CPU one of its steps takes minutes: it runs at the size `cpu`
# names (depth 12, small width and length), the same program's path, and says so.
PAPER = dict(width=512, depth=12, seq=128, batch=128, heads=8, engine_k=10,
             sequential_steps=10, rounds=4, lrs=(1e-4,), models=3, dtype="bfloat16",
             cpu=dict(width=64, heads=4, seq=16, batch=8, engine_k=2, sequential_steps=2,
                      rounds=2))

PRESETS = {
    "tiny": Preset(width=32, depth=2, seq=16, batch=16, heads=4,
                   engine_k=50, sequential_steps=100, rounds=8),
    "small": Preset(width=64, depth=2, seq=32, batch=32, heads=4,
                    engine_k=10, sequential_steps=20, rounds=8, models_per_chunk=2),
    "medium": Preset(width=256, depth=4, seq=64, batch=32, heads=4,
                     engine_k=2, sequential_steps=1, rounds=2, models_per_chunk=2),
    "paper": Preset(**PAPER),
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


def check_models(models: int, lrs=LRS) -> int:
  """`models`, or a one-line UserError unless it is a positive multiple of len(lrs)."""
  if isinstance(models, bool) or not isinstance(models, int) or models < len(lrs) \
      or models % len(lrs) or models > MAX_MODELS:
    what = (f"a positive multiple of {len(lrs)} (seeds x the {len(lrs)} learning rates)"
            if len(lrs) > 1 else "a positive count")
    raise UserError(f"--models must be {what} up to {MAX_MODELS}, got {models!r}")
  return models


def on_platform(p: Preset, platform: str) -> Preset:
  """The preset as it runs on `platform`: its `cpu` size on a CPU, else as defined."""
  return dataclasses.replace(p, **p.cpu, cpu=None) if p.cpu and platform == "cpu" else p


def grid_specs(p: Preset, models: int = NUM_MODELS) -> list[ensemble.ModelSpec]:
  """`models` models: seeds 0.. x the preset's learning rates, all at its shape."""
  return [ensemble.ModelSpec(depth=p.depth, width=p.width, heads=p.heads, seed=s, lr=lr)
          for s in range(models // len(p.lrs)) for lr in p.lrs]


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
