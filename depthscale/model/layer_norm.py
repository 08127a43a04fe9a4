"""The masked LayerNorm: statistics over a model's active units only (a padded model
computes what its true width computes), with its backward pass written out.
Written for one model; never imports core/, sweep/ or tasks/.
"""
from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from depthscale.model.sums import column_sum, row_dot


def masked_layer_norm(x_TxD, scale_D, bias_D, mask_D, eps=1e-5):
  """LayerNorm whose statistics run over the active units only; padded units give 0.
  Computed in the parameters' dtype, returned in the input's. Its backward pass is
  written out (_norm_bwd): it keeps the normalised input and one scale per row, where
  autodiff kept several float tensors of the input's size and ran more passes over them
  (BUILD_NOTES, the one-model step)."""
  out_dtype = x_TxD.dtype
  y_TxD = _norm(x_TxD.astype(scale_D.dtype), scale_D, bias_D, mask_D, eps)
  return y_TxD.astype(out_dtype)


def _norm_parts(x_TxD, mask_D, eps):
  """(x normalised over the active units, 1 / std per row, the active count)."""
  n = jnp.sum(mask_D)
  mean_Tx1 = row_dot(x_TxD, mask_D) / n
  centred_TxD = (x_TxD - mean_Tx1) * mask_D[None]
  var_Tx1 = jnp.sum(centred_TxD * centred_TxD, -1, keepdims=True) / n
  rstd_Tx1 = jax.lax.rsqrt(var_Tx1 + eps)
  return centred_TxD * rstd_Tx1, rstd_Tx1, n


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def _norm(x_TxD, scale_D, bias_D, mask_D, eps):
  xhat_TxD, _, _ = _norm_parts(x_TxD, mask_D, eps)
  return xhat_TxD * scale_D[None] + bias_D[None] * mask_D[None]


def _norm_fwd(x_TxD, scale_D, bias_D, mask_D, eps):
  xhat_TxD, rstd_Tx1, n = _norm_parts(x_TxD, mask_D, eps)
  y_TxD = xhat_TxD * scale_D[None] + bias_D[None] * mask_D[None]
  return y_TxD, (xhat_TxD, rstd_Tx1, n, scale_D, mask_D)


def _norm_bwd(eps, res, g_TxD):
  """The LayerNorm gradient over the active units: dx = rstd (gs - mean(gs) - xhat
  mean(gs xhat)) with gs = g * scale, means over the n active units, 0 on padded ones."""
  del eps
  xhat_TxD, rstd_Tx1, n, scale_D, mask_D = res
  m_1xD = mask_D[None]
  gs_TxD = g_TxD * scale_D[None] * m_1xD
  gx_TxD = g_TxD * xhat_TxD  # xhat is 0 on padded units: sum(gs xhat) = sum(gx scale)
  mean_gs_Tx1 = row_dot(g_TxD, scale_D * mask_D) / n
  mean_gsx_Tx1 = row_dot(gx_TxD, scale_D) / n
  dx_TxD = rstd_Tx1 * (gs_TxD - (mean_gs_Tx1 + xhat_TxD * mean_gsx_Tx1) * m_1xD)
  return dx_TxD, column_sum(gx_TxD), column_sum(g_TxD) * mask_D, jnp.zeros_like(mask_D)


_norm.defvjp(_norm_fwd, _norm_bwd)


class LayerNorm(nn.Module):
  dtype: str = "float32"

  @nn.compact
  def __call__(self, x_TxD, mask_D):
    d = x_TxD.shape[-1]
    scale = self.param("scale", nn.initializers.ones, (d,), self.dtype)
    bias = self.param("bias", nn.initializers.zeros, (d,), self.dtype)
    return masked_layer_norm(x_TxD, scale, bias, mask_D)
