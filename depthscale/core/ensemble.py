"""The models axis M is born here: specs -> one padded shape -> stacked params and Arch.

Each model is initialised by one compiled init per true shape but its depth (its key as
data; init_depth), cut to its depth, zero-padded into the group's shape and stacked on a
leading axis M.
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
  """Parameters [M, ...] of all specs in `cfg`'s padded shape. Each model is initialised
  by one compiled program per true shape but its depth (its key as data; see
  init_depth), which every group, lone reference and refill with that shape reuses; a
  second, cheap program cuts each to its depth, pads and stacks them (one per group
  composition)."""
  parts = []
  for s in specs:
    depth = init_depth(s.depth)
    parts.append(compiled.bounded(_init_at, KEEP_INITS)(
        dataclasses.replace(init_config(true_config(cfg, s)), depth=depth),
        (depth,) + s.shape()[1:], init_key(s.seed)[None]))
  shapes = tuple(s.shape() for s in specs)
  return compiled.bounded(_assemble, KEEP_INITS)(init_config(cfg), shapes, parts)


KEEP_INITS = 32  # compiled programs of each kind kept per process (refills reuse a few)
INIT_DEPTH_STEP = 4  # the depths one compiled init serves: 1-4, 5-8, ...


def init_depth(depth: int) -> int:
  """The depth a model of `depth` layers is initialised at: the layers' keys are split
  from one key at their index alone (JAX's partitionable Threefry), and their
  parameters drawn in a scan, so a model's parameters are the first `depth` layers of a
  deeper init's, bit for bit (tests/test_core.py), and a depth sweep compiles one init
  per INIT_DEPTH_STEP depths instead of one per depth. At most INIT_DEPTH_STEP - 1
  layers are drawn and dropped."""
  if not (jax.config.jax_threefry_partitionable
          and jax.config.jax_default_prng_impl == "threefry2x32"):  # no prefix to keep
    return depth
  return -(-depth // INIT_DEPTH_STEP) * INIT_DEPTH_STEP


def init_config(cfg: ModelConfig) -> ModelConfig:
  """`cfg` with the fields that choose how the model is computed, not its parameters
  (kernels, remat, unrolling, GELU, compute dtype), at one value: every variant of a
  shape shares one compiled init, and its parameters are bit for bit the variant's own
  (tests/test_core.py)."""
  return dataclasses.replace(cfg, attention="einsum", remat="none", unroll="none",
                             gelu="xla", compute_dtype=None)


def _dummy_input(cfg: ModelConfig, length: int | None = None):
  """A sequence of `cfg`'s input kind (max_len long unless `length`), for flax's init."""
  t = cfg.max_len if length is None else length
  return (jnp.zeros((t,), jnp.int32) if cfg.vocab is not None
          else jnp.zeros((t, cfg.input_dim), jnp.float32))


@functools.partial(jax.jit, static_argnums=(0, 1))
def _init_at(tcfg: ModelConfig, shape: tuple, keys):
  """The parameters [k, ...] of k models of one shape (tcfg), vmapped over their keys.
  Bitwise what flax's init of each model alone gives op by op (transformer.normal keeps
  XLA from folding the init's scale into the sampler; tests/test_core.py checks it), so
  a figure recorded with the eager init (before 8778ff9, 2026-11-26) does not move."""
  dummy = _dummy_input(tcfg, length=1)  # the forward init runs shapes no parameter
  tarch = arch_for(tcfg, shape[0], shape[1], shape[2], shape[3])
  return jax.vmap(lambda k: Transformer(tcfg).init(k, dummy, tarch)["params"])(keys)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _assemble(cfg: ModelConfig, shapes: tuple, parts):
  """The models' parameters (one [1, ...] tree each, in model order, drawn at
  init_depth), cut to their depth, zero-padded into `cfg`'s shape and stacked [M, ...]:
  one pad per true shape."""
  padded_like = _params_like(cfg)
  buckets: dict[tuple, list[int]] = {}
  for i, shape in enumerate(shapes):
    buckets.setdefault(shape, []).append(i)
  stacked, order = [], []
  for shape, idx in buckets.items():
    same = jax.tree.map(lambda *xs: jnp.concatenate(xs), *[parts[i] for i in idx])
    same = dict(same, stack=jax.tree.map(lambda x: x[:, :shape[0]], same["stack"]))
    like = jax.tree.map(lambda a: jax.ShapeDtypeStruct((len(idx),) + a.shape, a.dtype),
                        padded_like)
    stacked.append(pad_to(same, like))
    order.extend(idx)
  params = jax.tree.map(lambda *xs: jnp.concatenate(xs), *stacked)
  inverse = np.argsort(np.asarray(order))
  return jax.tree.map(lambda x: x[inverse], params)


def _params_like(cfg: ModelConfig):
  """The shapes and dtypes of one model's parameters in `cfg` (the stacked layers under
  "stack", [depth, ...] each)."""
  arch = arch_for(cfg, cfg.depth, cfg.width, cfg.heads, cfg.repeats)
  return jax.eval_shape(
      lambda k: Transformer(cfg).init(k, _dummy_input(cfg, length=1), arch)["params"],
      jax.random.key(0))


def stack_arch(specs, cfg: ModelConfig) -> Arch:
  """Arch [M, ...]: the per-model masks and true head sizes."""
  archs = [arch_for(cfg, s.depth, s.width, s.heads, s.repeats) for s in specs]
  # stacked on the host: no program compiled per leaf shape and model count
  return jax.tree.map(lambda *xs: jnp.asarray(np.stack([np.asarray(x) for x in xs])), *archs)
