"""Causal self-attention for one sequence, and which kernel computes it.

einsum: the plain formula with its backward pass written out (_attention_bwd), which keeps
the probabilities once, in the inputs' dtype, where autodiff kept the float32 logits, the
mask's select and the softmax's own intermediates (BUILD_NOTES, the one-model step).
dot_product and cudnn: jax.nn.dot_product_attention's XLA and cuDNN kernels.
Written for one model; never imports core/, sweep/ or tasks/.
"""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp

from depthscale.model.sums import pair_dot

# The valid values of ModelConfig.attention (a study's model.attention), resolved below
ATTENTIONS = ("einsum", "dot_product", "cudnn", "auto")


def deterministic_gpu_ops() -> bool:
  """Whether XLA_FLAGS asks for deterministic GPU ops (`depthscale run`, `plan` and `bench`
  do: sweep/study.reproducible_xla)."""
  return "xla_gpu_deterministic_ops=true" in os.environ.get("XLA_FLAGS", "")


def attention_impl(name: str, dtype=jnp.float32, head_dim: int = 64) -> str:
  """The kernel, `auto` resolved at trace time: on a GPU, cuDNN's flash attention where it
  applies (bfloat16 or float16 inputs, a head size that is a multiple of 8 up to 128) and
  XLA's dot_product kernel otherwise; einsum elsewhere (as fast on a CPU, and its softmax
  keeps float64). `cudnn` off a GPU runs the XLA kernel with the same folded scale.
  Under deterministic GPU ops `auto` never picks cuDNN: with them its program failed when
  run on an H200 (jax 0.11.2, CUDA 13: XLA asks cuDNN for a deterministic flash backward;
  BUILD_NOTES, the third GPU check), and an explicit `cudnn` may fail the same way."""
  if name not in ATTENTIONS:
    raise ValueError(f"unknown attention {name!r}")
  gpu = jax.default_backend() == "gpu"
  if name == "auto":
    if not gpu:
      return "einsum"
    fits = jnp.dtype(dtype) in (jnp.bfloat16, jnp.float16) and head_dim % 8 == 0 \
        and head_dim <= 128 and not deterministic_gpu_ops()
    return "cudnn" if fits else "dot_product"
  return name


def causal_attention(q_TxHxK, k_TxHxK, v_TxHxK, head_dim, impl: str):
  """softmax(q k^T / sqrt(head_dim)) v over earlier positions, per head. Logits and
  softmax in at least float32; bfloat16 inputs multiply as bfloat16 with float32
  accumulation, forward and backward (as jax.nn.dot_product_attention and cuDNN do).
  Padded head units are zero (q.k unchanged; the scale uses the true `head_dim`); padded
  heads have q = k = v = 0, so they attend uniformly to zeros and output 0."""
  if impl == "dot_product":  # scale is per-model data (a tracer): fine for the XLA kernel
    return jax.nn.dot_product_attention(q_TxHxK, k_TxHxK, v_TxHxK,
                                        scale=jax.lax.rsqrt(head_dim), is_causal=True,
                                        implementation="xla")
  if impl == "cudnn":  # cuDNN takes a static scale only: the per-model one folded into q
    q_TxHxK = q_TxHxK * jax.lax.rsqrt(head_dim).astype(q_TxHxK.dtype)
    fits = jax.default_backend() == "gpu" and q_TxHxK.dtype in (jnp.bfloat16, jnp.float16)
    kernel = "cudnn" if fits else "xla"  # the fallback off a GPU, or for float32 inputs
    return jax.nn.dot_product_attention(q_TxHxK, k_TxHxK, v_TxHxK, scale=1.0,
                                        is_causal=True, implementation=kernel)
  return _einsum_attention(q_TxHxK, k_TxHxK, v_TxHxK, jax.lax.rsqrt(head_dim))


def _parts(q_TxHxK):
  """(the softmax's dtype: at least float32; the bf16 x bf16 -> f32 matmul preset or None)"""
  wide = jnp.promote_types(q_TxHxK.dtype, jnp.float32)
  bf16 = jax.lax.DotAlgorithmPreset.BF16_BF16_F32 if q_TxHxK.dtype == jnp.bfloat16 else None
  return wide, bf16


def _attention_fwd(q_TxHxK, k_TxHxK, v_TxHxK, scale):
  wide, bf16 = _parts(q_TxHxK)
  t = q_TxHxK.shape[0]
  logits_HxTxT = jnp.einsum("thk,shk->hts", q_TxHxK, k_TxHxK, preferred_element_type=wide,
                            precision=bf16)
  logits_HxTxT = logits_HxTxT * scale.astype(wide)
  causal_TxT = jnp.tril(jnp.ones((t, t), bool))
  logits_HxTxT = jnp.where(causal_TxT, logits_HxTxT, jnp.finfo(wide).min)
  attn_HxTxT = jax.nn.softmax(logits_HxTxT, axis=-1).astype(v_TxHxK.dtype)
  out_TxHxK = jnp.einsum("hts,shk->thk", attn_HxTxT, v_TxHxK)
  return out_TxHxK, (q_TxHxK, k_TxHxK, v_TxHxK, attn_HxTxT, out_TxHxK, scale)


@jax.custom_vjp
def _einsum_attention(q_TxHxK, k_TxHxK, v_TxHxK, scale):
  return _attention_fwd(q_TxHxK, k_TxHxK, v_TxHxK, scale)[0]


def _attention_bwd(res, d_out_TxHxK):
  """dv = P^T dO; dP = dO V^T; dS = P (dP - rowsum(dO O)) (the softmax's gradient, 0 where
  masked, since P is 0 there); dq = dS k scale, dk = dS^T q scale. Matmuls as forward
  (bf16 inputs: bf16 products, float32 sums), the softmax's gradient in float32."""
  q_TxHxK, k_TxHxK, v_TxHxK, attn_HxTxT, out_TxHxK, scale = res
  wide, bf16 = _parts(q_TxHxK)
  d_v = jnp.einsum("hts,thk->shk", attn_HxTxT, d_out_TxHxK, precision=bf16,
                   preferred_element_type=wide).astype(v_TxHxK.dtype)
  d_attn_HxTxT = jnp.einsum("thk,shk->hts", d_out_TxHxK, v_TxHxK, precision=bf16,
                            preferred_element_type=wide)
  delta_TxH = pair_dot(d_out_TxHxK.astype(wide), out_TxHxK.astype(wide))  # model/sums.py
  delta_HxTx1 = delta_TxH.T[..., None]
  d_logits_HxTxT = attn_HxTxT.astype(wide) * (d_attn_HxTxT - delta_HxTx1) * scale.astype(wide)
  d_logits_HxTxT = d_logits_HxTxT.astype(q_TxHxK.dtype)
  d_q = jnp.einsum("hts,shk->thk", d_logits_HxTxT, k_TxHxK, precision=bf16,
                   preferred_element_type=wide).astype(q_TxHxK.dtype)
  d_k = jnp.einsum("hts,thk->shk", d_logits_HxTxT, q_TxHxK, precision=bf16,
                   preferred_element_type=wide).astype(k_TxHxK.dtype)
  return d_q, d_k, d_v, jnp.zeros_like(scale)


_einsum_attention.defvjp(_attention_fwd, _attention_bwd)
