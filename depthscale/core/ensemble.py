"""The models axis M is born here: specs -> one padded shape -> stacked params and Arch.

Each model is initialised at its true shape (vmapped over the keys of models that share
a shape), then zero-padded into the group's shape and stacked on a leading axis M.
Knows nothing of tasks, sweeps or files.
"""
from __future__ import annotations

import dataclasses
import functools
import jax
import jax.numpy as jnp
import numpy as np

from depthscale.core import compiled
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
  are initialised by one vmapped init over their keys. One compiled program per (group
  shape, models' true shapes): a refill or a rerun of the same shapes reuses it."""
  keys = jnp.stack([init_key(s.seed) for s in specs])
  return compiled.bounded(_init_padded, KEEP_INITS)(cfg, tuple(s.shape() for s in specs), keys)


KEEP_INITS = 32  # compiled inits kept per process (a queue's refills reuse a few)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _init_padded(cfg: ModelConfig, shapes: tuple, keys):
  """init_params, jitted. The result is bitwise that of running the same init op by op
  (transformer.normal keeps XLA from folding the init's scale into the sampler; tests/
  test_core.py checks it), so a figure recorded with the eager init of earlier sessions
  does not move."""
  dummy = (jnp.zeros((cfg.max_len,), jnp.int32) if cfg.vocab is not None
           else jnp.zeros((cfg.max_len, cfg.input_dim), jnp.float32))
  padded_like = jax.eval_shape(
      lambda k: Transformer(cfg).init(k, dummy, arch_for(cfg, cfg.depth, cfg.width, cfg.heads,
                                                         cfg.repeats))["params"],
      jax.random.key(0))
  buckets: dict[tuple, list[int]] = {}
  for i, shape in enumerate(shapes):
    buckets.setdefault(shape, []).append(i)
  parts, order = [], []
  for shape, idx in buckets.items():
    spec = ModelSpec(*shape[:3], repeats=shape[3])
    tcfg = true_config(cfg, spec)
    tarch = arch_for(tcfg, spec.depth, spec.width, spec.heads, spec.repeats)
    p = jax.vmap(lambda k: Transformer(tcfg).init(k, dummy, tarch)["params"])(keys[np.asarray(idx)])
    like = jax.tree.map(lambda a: jax.ShapeDtypeStruct((len(idx),) + a.shape, a.dtype),
                        padded_like)
    parts.append(pad_to(p, like))
    order.extend(idx)
  params = jax.tree.map(lambda *xs: jnp.concatenate(xs), *parts)
  inverse = np.argsort(np.asarray(order))
  return jax.tree.map(lambda x: x[inverse], params)


def stack_arch(specs, cfg: ModelConfig) -> Arch:
  """Arch [M, ...]: the per-model masks and true head sizes."""
  archs = [arch_for(cfg, s.depth, s.width, s.heads, s.repeats) for s in specs]
  # stacked on the host: no program compiled per leaf shape and model count
  return jax.tree.map(lambda *xs: jnp.asarray(np.stack([np.asarray(x) for x in xs])), *archs)
