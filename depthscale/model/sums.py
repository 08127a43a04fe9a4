"""Sums of products along an axis (the LayerNorm's statistics and their gradients,
attention's backward delta), written for the device they run on: on a CPU as matmuls,
elsewhere as reductions XLA fuses with their neighbours. The same sums either way (the
order of the additions may differ: float32's last bits).

Why: XLA's CPU backend runs a fused multiply-and-reduce of two operands through a slow
path, several times the time of the matrix-vector product of the same sum, worse with a
leading axis of one (as each device's slice of the engine's models has); the figures are
in BUILD_NOTES, the one-model step (measured with 6d01094, 2026-11-27).
Written for one model; never imports core/, sweep/ or tasks/.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

EXACT = jax.lax.Precision.HIGHEST  # never a reduced-precision pass (TF32, bf16) for a sum


def as_dots(platform: str | None = None) -> bool:
  """Whether the sums below are matmuls: on a CPU (`platform`, default JAX's backend)."""
  return (platform or jax.default_backend()) == "cpu"


def row_dot(x_TxD, w_D):
  """sum_d x[..., d] w[d], kept as [..., 1]."""
  if as_dots():
    return jnp.dot(x_TxD, w_D, precision=EXACT)[..., None]
  return jnp.sum(x_TxD * w_D.reshape((1,) * (x_TxD.ndim - 1) + w_D.shape), -1, keepdims=True)


def pair_dot(a, b):
  """sum over the last axis of a * b (two arrays of one shape): [..., K] -> [...]."""
  if as_dots():
    return jnp.einsum("...k,...k->...", a, b, precision=EXACT)
  return jnp.sum(a * b, -1)


def column_sum(x_TxD):
  """The sum over every axis but the last: [..., D] -> [D]."""
  rows = tuple(range(x_TxD.ndim - 1))
  if as_dots():
    ones = jnp.ones(x_TxD.shape[:-1], x_TxD.dtype)
    return jnp.tensordot(ones, x_TxD, (rows, rows), precision=EXACT)
  return jnp.sum(x_TxD, rows)
