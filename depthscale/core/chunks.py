"""Models in chunks: a group's models axis run a few models at a time (lax.map), either
chunk by chunk at each step (compact, inside its per-device step) or each chunk through
all its steps, then the next (pad: by_chunk). Same results as all at once (float64:
rounding only), less live memory (train.models_per_chunk; the plan's memory fit sets it).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from depthscale.core import train


def local_chunk(models_per_chunk: int, n_devices: int) -> int:
  """models_per_chunk of a compacted group counts models over all devices (as for pad):
  each device runs its share of a chunk."""
  return max(1, models_per_chunk // n_devices) if models_per_chunk > 0 else 0


def chunk_size(m: int, models_per_chunk: int) -> int:
  """The largest divisor of m that is <= models_per_chunk (m itself when 0 or >= m)."""
  if models_per_chunk <= 0 or models_per_chunk >= m:
    return m
  return max(b for b in range(1, models_per_chunk + 1) if m % b == 0)


def map_models(fn_M, models_per_chunk: int, out_axes=0):
  """fn_M (already vmapped over the leading models axis of every argument), applied to
  chunks of models one after another with lax.map; its outputs' models axis is
  `out_axes` (one for all, or one per output). Chunk j holds models j, j + M/b,
  j + 2M/b, ...: when the models axis is split over devices in contiguous blocks (and b
  divides evenly over them), every chunk keeps every device busy."""
  def run(*args_M):
    m = jax.tree.leaves(args_M)[0].shape[0]
    b = chunk_size(m, models_per_chunk)
    if b == m:
      return fn_M(*args_M)
    split = lambda x: jnp.swapaxes(x.reshape((b, m // b) + x.shape[1:]), 0, 1)

    def merge(x, axis):  # [M/b, ..., b (at axis + 1), ...] -> [..., M (at axis), ...]
      x = jnp.swapaxes(jnp.moveaxis(x, 0, axis), axis, axis + 1)
      return x.reshape(x.shape[:axis] + (m,) + x.shape[axis + 2:])
    out = jax.lax.map(lambda a: fn_M(*a), jax.tree.map(split, args_M))
    if isinstance(out_axes, int):
      return jax.tree.map(lambda x: merge(x, out_axes), out)
    return tuple(jax.tree.map(lambda x, a=a: merge(x, a), o) for o, a in zip(out, out_axes))
  return run


def by_chunk(loop_M, tcfg: train.TrainConfig):
  """loop_M (state_M, hparams_M, arch_M) -> (state_M, metrics {name: [K, M]}), a loop
  over steps, run on the pad layout's chunks of models one after another: each chunk
  runs every step, then the next, so a chunk's state stays where it is across the steps
  (faster than taking the chunks in turn at every step: BUILD_NOTES, the one-model step)
  and each step runs at the bucket of its chunk's furthest stage. As is without chunks,
  and for compact (chunked inside its step, per device)."""
  if tcfg.layout != "pad" or tcfg.models_per_chunk <= 0:
    return loop_M
  return map_models(loop_M, tcfg.models_per_chunk, out_axes=(0, 1))
