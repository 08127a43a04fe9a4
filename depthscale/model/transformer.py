"""A causal pre-LN transformer (Flax linen), standard or looped, that can run padded.

The model's static shape (ModelConfig) may be larger than the true shape of the model
it runs: per-model `Arch` data (layer/repeat mask, width mask, true head size) makes a
zero-padded parameter tree compute exactly what the true-shape model computes.
Options: a compute dtype (bfloat16 matmuls; softmax, norms, rotary angles and outputs
stay in `dtype`), and how the same function is computed: the attention kernel,
rematerialised layers and the unrolled layer stack, each `auto` by default (the fastest
measured on the device it runs on), and what the MLP's GELU keeps for the backward pass.
Written for one model; never imports core/, sweep/ or tasks/.
"""
from __future__ import annotations

import dataclasses

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from depthscale.model.attention import ATTENTIONS, attention_impl, causal_attention  # noqa: F401
from depthscale.model.gelu import GELUS, gelu  # noqa: F401
from depthscale.model.layer_norm import LayerNorm, masked_layer_norm  # noqa: F401


# The valid values of ModelConfig's options (a study's model section), each acted on below
POSITIONS = ("learned", "rotary", "none")     # pos: a learned table, rotary q/k, or none
DTYPES = ("float32", "float64")               # dtype: parameters and activations
COMPUTE_DTYPES = ("float32", "bfloat16")      # compute_dtype: matmuls (float32: in dtype)
# attention: ATTENTIONS, the kernel (model/attention.py)
REMATS = ("none", "block", "auto")            # remat: what the backward pass recomputes
                                              # (remat_policy)
UNROLLS = ("none", "full", "auto")            # unroll: the layer stack's scan (unroll_layers)
# gelu: GELUS, what the MLP's GELU keeps for the backward pass (model/gelu.py)
ACCELERATORS = ("gpu", "tpu")                 # where `auto` picks the accelerator's settings


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Static shape. For looped models, `depth` layers form a block repeated `repeats` times."""
  depth: int
  width: int
  heads: int
  max_len: int
  output_dim: int
  vocab: int | None = None       # token inputs, or
  input_dim: int | None = None   # continuous inputs (linear projection)
  mlp_ratio: int = 4
  pos: str = "learned"           # learned | rotary | none
  repeats: int = 1               # > 1 only for looped models
  head_size: int | None = None   # per-head size; default width // heads
  dtype: str = "float32"         # parameters and activations (float64 needs jax_enable_x64)
  compute_dtype: str | None = None  # e.g. "bfloat16": matmuls and activations in it (None or
                                    # "float32", what a config writes: in dtype);
                                    # parameters, layer-norm statistics, attention softmax,
                                    # rotary angles, final norm, head and outputs in dtype
  # How the model is computed (the same function either way); auto: the fastest measured
  # on the device it runs on (attention_impl, remat_policy, unroll_layers).
  attention: str = "auto"        # einsum | dot_product (jax.nn.dot_product_attention) |
                                 # cudnn (its flash kernel on a GPU) | auto
  remat: str = "auto"            # none | block (each layer recomputed in the backward pass)
                                 # | auto
  unroll: str = "auto"           # none (a rolled scan) | full (every layer unrolled) | auto
  gelu: str = "xla"              # xla (autodiff keeps its intermediates) | recompute (keeps
                                 # only its input; the backward recomputes the derivative)

  def __post_init__(self):
    if self.compute_dtype == "float32":  # what a config writes for "no reduced precision"
      object.__setattr__(self, "compute_dtype", None)  # matmuls in `dtype`, as with None

  @property
  def head_dim(self) -> int:
    return self.head_size or self.width // self.heads


@flax.struct.dataclass
class Arch:
  """Per-model data that lets a padded program run one model's true shape."""
  layer_mask_L: jax.Array    # [depth] 1.0 for the model's layers
  repeat_mask_R: jax.Array   # [repeats] 1.0 for the repeats the model applies
  width_mask_D: jax.Array    # [width] 1.0 for the model's residual units
  head_dim: jax.Array        # scalar: the model's true head size (scale and rotary)


def arch_for(cfg: ModelConfig, depth: int, width: int, heads: int, repeats: int = 1) -> Arch:
  """The Arch of a model of true shape (depth, width, heads, repeats) inside `cfg`."""
  f32 = jnp.dtype(cfg.dtype)
  return Arch(
      layer_mask_L=(jnp.arange(cfg.depth) < depth).astype(f32),
      repeat_mask_R=(jnp.arange(cfg.repeats) < repeats).astype(f32),
      width_mask_D=(jnp.arange(cfg.width) < width).astype(f32),
      head_dim=jnp.asarray(width // heads, f32))


def rotate(x_TxHxK, head_dim):
  """Rotary embedding on interleaved pairs, frequencies from the true head size. Angles
  and the rotation are computed in at least float32 (bfloat16 holds positions exactly
  only up to 256), the result is returned in the input's dtype."""
  t, _, k = x_TxHxK.shape
  wide = jnp.promote_types(x_TxHxK.dtype, jnp.float32)
  i = jnp.arange(k // 2, dtype=wide)
  inv_freq = 10000.0 ** (-2.0 * i / head_dim.astype(wide))  # true head size: as unpadded
  angle_TxI = jnp.arange(t, dtype=wide)[:, None] * inv_freq[None, :]
  cos, sin = jnp.cos(angle_TxI)[:, None, :], jnp.sin(angle_TxI)[:, None, :]
  x_TxHxK_wide = x_TxHxK.astype(wide)
  x1, x2 = x_TxHxK_wide[..., 0::2], x_TxHxK_wide[..., 1::2]
  out = jnp.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
  return out.reshape(x_TxHxK.shape).astype(x_TxHxK.dtype)


def on_accelerator(platform: str | None = None) -> bool:
  """Whether `platform` (default: JAX's default backend) is a GPU or TPU."""
  return (platform or jax.default_backend()) in ACCELERATORS


def remat_policy(name: str, platform: str | None = None) -> str:
  """none | block, `auto` resolved at trace time (or for `platform`): none on a GPU, where
  with every layer unrolled storing the activations was 1.25x faster than recomputing them
  (3.3x the memory; BUILD_NOTES, the third GPU check), and on a CPU, where remat saved no
  time; block on a TPU (unmeasured there)."""
  if name not in REMATS:
    raise ValueError(f"unknown remat {name!r}")
  if name == "auto":
    return "block" if (platform or jax.default_backend()) == "tpu" else "none"
  return name


CPU_UNROLL_DEPTH = 24  # auto on a CPU: stacks up to this deep are unrolled (measured to 24)


def unroll_layers(name: str, depth: int, remat: str, cpu_depth: int = CPU_UNROLL_DEPTH) -> bool:
  """Whether the layer stack is unrolled, `auto` resolved at trace time. On an accelerator
  every stack is unrolled: a rolled scan copies the stacked layer buffers every step. On
  a CPU stacks up to `cpu_depth` without remat: measured +26% (tiny) and +48% (small)
  throughput at depth 2, +31%, +43% and +30% at depths 8, 12 and 24, compiling as fast;
  unrolled, remat saved no memory on XLA CPU (BUILD_NOTES, the one-model step)."""
  if name not in UNROLLS:
    raise ValueError(f"unknown unroll {name!r}")
  if name == "auto":
    return on_accelerator() or (depth <= cpu_depth and remat_policy(remat) == "none")
  return name == "full"


class Block(nn.Module):
  """One pre-LN layer: x + attn(LN(x)), then x + mlp(LN(x)); scaled by the layer mask."""
  cfg: ModelConfig

  @nn.compact
  def __call__(self, x_TxD, on, arch: Arch):
    cfg = self.cfg
    h, k, d = cfg.heads, cfg.head_dim, cfg.width
    init = nn.initializers.normal(0.02)
    dt = dict(dtype=cfg.compute_dtype or cfg.dtype, param_dtype=cfg.dtype)
    on = on.astype(x_TxD.dtype)
    y = LayerNorm(cfg.dtype, name="ln1")(x_TxD, arch.width_mask_D)
    q_TxHxK = nn.DenseGeneral((h, k), use_bias=False, kernel_init=init, **dt, name="q")(y)
    k_TxHxK = nn.DenseGeneral((h, k), use_bias=False, kernel_init=init, **dt, name="k")(y)
    v_TxHxK = nn.DenseGeneral((h, k), use_bias=False, kernel_init=init, **dt, name="v")(y)
    if cfg.pos == "rotary":
      q_TxHxK, k_TxHxK = rotate(q_TxHxK, arch.head_dim), rotate(k_TxHxK, arch.head_dim)
    o_TxHxK = causal_attention(q_TxHxK, k_TxHxK, v_TxHxK, arch.head_dim,
                               attention_impl(cfg.attention, q_TxHxK.dtype, k))
    x_TxD = x_TxD + on * nn.DenseGeneral(d, axis=(-2, -1), kernel_init=init, **dt, name="o")(o_TxHxK)
    y = LayerNorm(cfg.dtype, name="ln2")(x_TxD, arch.width_mask_D)
    y = gelu(cfg.gelu)(nn.Dense(cfg.mlp_ratio * d, kernel_init=init, **dt, name="mlp_in")(y))
    x_TxD = x_TxD + on * nn.Dense(d, kernel_init=init, **dt, name="mlp_out")(y)
    return x_TxD


class Stack(nn.Module):
  """`depth` layers with stacked parameters [depth, ...], scanned; with remat="block"
  each layer keeps only its input for the backward pass and recomputes the rest."""
  cfg: ModelConfig

  @nn.compact
  def __call__(self, x_TxD, arch: Arch):
    remat = remat_policy(self.cfg.remat)
    layer = nn.remat(Block) if remat == "block" else Block

    def body(block, x, on):
      return block(x, on, arch), None
    # Never unrolled at init: unrolled, XLA compiles one random sampler per layer (the
    # init's compile time grew with depth); rolled, the same numbers (tests/test_core.py).
    unrolled = unroll_layers(self.cfg.unroll, self.cfg.depth, self.cfg.remat)
    unroll = self.cfg.depth if unrolled and not self.is_initializing() else 1
    scan = nn.scan(body, variable_axes={"params": 0}, split_rngs={"params": True},
                   length=self.cfg.depth, unroll=unroll)
    x_TxD, _ = scan(layer(self.cfg, name="layer"), x_TxD, arch.layer_mask_L)
    return x_TxD


def normal(stddev: float):
  """flax's normal initializer, with the same numbers whether the init runs op by op or
  compiled as one program: the barrier keeps XLA from folding the scale into the
  sampler's own constants, which moves the last bit (BUILD_NOTES, Test suite). The
  layers' initializers run inside a scan, compiled either way, and keep flax's."""
  def init(key, shape, dtype):
    sample = jax.lax.optimization_barrier(jax.random.normal(key, shape, dtype))
    return sample * jnp.array(stddev, dtype)
  return init


class Transformer(nn.Module):
  """Maps one sequence [T] (tokens) or [T, input_dim] (vectors) to outputs [T, output_dim]."""
  cfg: ModelConfig

  @nn.compact
  def __call__(self, inputs, arch: Arch):
    cfg = self.cfg
    init = normal(0.02)
    dt = dict(dtype=cfg.compute_dtype or cfg.dtype, param_dtype=cfg.dtype)
    if cfg.vocab is not None:
      x_TxD = nn.Embed(cfg.vocab, cfg.width, embedding_init=init, **dt, name="embed")(inputs)
    else:
      x_TxD = nn.Dense(cfg.width, kernel_init=init, **dt, name="embed")(inputs)
    t = x_TxD.shape[0]
    if cfg.pos == "learned":
      pos_TxD = self.param("pos", init, (cfg.max_len, cfg.width), cfg.dtype)
      x_TxD = x_TxD + pos_TxD[:t].astype(x_TxD.dtype)
    stack = Stack(cfg, name="stack")
    if cfg.repeats == 1:
      x_TxD = stack(x_TxD, arch)
    else:  # looped: the same block applied `repeats` times, masked per model
      def body(mdl, x, on):
        return x + on.astype(x.dtype) * (mdl(x, arch) - x), None
      loop = nn.scan(body, variable_broadcast="params", split_rngs={"params": False},
                     length=cfg.repeats)
      x_TxD, _ = loop(stack, x_TxD, arch.repeat_mask_R)
    # The final norm and the (small) head run in dtype: the outputs, and the loss on
    # them, are never rounded to the compute dtype.
    x_TxD = LayerNorm(cfg.dtype, name="ln_f")(x_TxD.astype(cfg.dtype), arch.width_mask_D)
    out = nn.Dense(cfg.output_dim, kernel_init=init, dtype=cfg.dtype, param_dtype=cfg.dtype,
                   name="head")(x_TxD)
    return out
