"""The models axis M is born here: specs -> one padded shape -> stacked params and Arch.

Each model is initialised at its true shape (vmapped over the keys of models that share
a shape), then zero-padded into the group's shape and stacked on a leading axis M.
Knows nothing of tasks, sweeps or files.
"""
from __future__ import annotations

import dataclasses
import jax
import jax.numpy as jnp
import numpy as np

from depthscale.model import Arch, ModelConfig, Transformer, arch_for


@dataclasses.dataclass(frozen=True)
class ModelSpec:
  """One model of a grid: its true shape and its own hyperparameters."""
  depth: int
  width: int
  heads: int
  seed: int = 0
  lr: float = 1e-3
  weight_decay: float = 0.01
  warmup: int = 0
  repeats: int = 1  # looped models: the block of `depth` layers is applied `repeats` times

  @property
  def head_dim(self) -> int:
    return self.width // self.heads

  def shape(self) -> tuple[int, int, int, int]:
    return (self.depth, self.width, self.heads, self.repeats)


def group_config(specs, **shared) -> ModelConfig:
  """The smallest static shape that holds every spec (padding where they differ)."""
  if not specs:
    raise ValueError("a group needs at least one model")
  return ModelConfig(
      depth=max(s.depth for s in specs), width=max(s.width for s in specs),
      heads=max(s.heads for s in specs), head_size=max(s.head_dim for s in specs),
      repeats=max(s.repeats for s in specs), **shared)


def true_config(cfg: ModelConfig, spec: ModelSpec) -> ModelConfig:
  """`cfg` shrunk to one spec's true shape (repeats stay: they carry no parameters)."""
  return dataclasses.replace(cfg, depth=spec.depth, width=spec.width, heads=spec.heads,
                             head_size=spec.head_dim)


def pad_to(tree, like):
  """Zero-pad every leaf of `tree` at the end of each axis to the shape of `like`."""
  def pad(x, y):
    widths = [(0, b - a) for a, b in zip(x.shape, y.shape)]
    if any(w < 0 for _, w in widths):
      raise ValueError(f"cannot pad shape {x.shape} into {y.shape}")
    return jnp.pad(x, widths)
  return jax.tree.map(pad, tree, like)


def init_key(seed: int) -> jax.Array:
  return jax.random.fold_in(jax.random.key(seed), 0)


def data_key(seed: int) -> jax.Array:
  return jax.random.fold_in(jax.random.key(seed), 1)


def init_params(specs, cfg: ModelConfig):
  """Parameters [M, ...] of all specs in `cfg`'s padded shape; models of one true shape
  are initialised by one vmapped init over their keys."""
  dummy = (jnp.zeros((cfg.max_len,), jnp.int32) if cfg.vocab is not None
           else jnp.zeros((cfg.max_len, cfg.input_dim), jnp.float32))
  padded_like = jax.eval_shape(
      lambda k: Transformer(cfg).init(k, dummy, arch_for(cfg, cfg.depth, cfg.width, cfg.heads,
                                                         cfg.repeats))["params"],
      jax.random.key(0))
  buckets: dict[tuple, list[int]] = {}
  for i, s in enumerate(specs):
    buckets.setdefault(s.shape(), []).append(i)
  parts, order = [], []
  for shape, idx in buckets.items():
    spec = specs[idx[0]]
    tcfg = true_config(cfg, spec)
    tarch = arch_for(tcfg, spec.depth, spec.width, spec.heads, spec.repeats)
    keys = jnp.stack([init_key(specs[i].seed) for i in idx])
    p = jax.vmap(lambda k: Transformer(tcfg).init(k, dummy, tarch)["params"])(keys)
    like = jax.tree.map(lambda a: jax.ShapeDtypeStruct((len(idx),) + a.shape, a.dtype),
                        padded_like)
    parts.append(pad_to(p, like))
    order.extend(idx)
  params = jax.tree.map(lambda *xs: jnp.concatenate(xs), *parts)
  inverse = np.argsort(np.asarray(order))
  out = jax.tree.map(lambda x: x[inverse], params)
  _forget_eager_programs()
  return out


_INITS = [0]
CLEAR_EVERY = 32


def _forget_eager_programs() -> None:
  """Every CLEAR_EVERY inits, drop JAX's cached executables (jax.clear_caches). An eager
  init compiles its layer scan anew each call (flax's lifted scan is a new function every
  time) and JAX keeps every executable it compiled; on CPU each holds ~230 memory maps,
  and a process past vm.max_map_count (65530 by default: ~280 inits, e.g. a queue's
  refills) aborts inside XLA ("Fatal Python error: Aborted", BUILD_NOTES). Compiled
  group programs are held by their Program and stay; jitted functions recompile on their
  next call. The numbers are unchanged: the init stays eager."""
  _INITS[0] += 1
  if _INITS[0] % CLEAR_EVERY == 0:
    jax.clear_caches()


def stack_arch(specs, cfg: ModelConfig) -> Arch:
  """Arch [M, ...]: the per-model masks and true head sizes."""
  archs = [arch_for(cfg, s.depth, s.width, s.heads, s.repeats) for s in specs]
  return jax.tree.map(lambda *xs: jnp.stack(xs), *archs)
