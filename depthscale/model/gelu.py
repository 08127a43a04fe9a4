"""The MLP's GELU (tanh approximation, flax's nn.gelu) and what its backward pass keeps.

xla: jax.nn.gelu under autodiff; XLA keeps the formula's intermediates (the cube, the
tanh and its products) for the backward pass: at the paper shape 24 of the 36 bf16
T x D units a layer keeps (BUILD_NOTES). recompute: the same forward values, a
custom_vjp whose only residual is the GELU's input x; the backward recomputes the
derivative of the same formula from x (as torch.compile does).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

GELUS = ("xla", "recompute")  # gelu: what the MLP's GELU keeps for the backward pass

_C = 0.044715  # jax.nn.gelu's (approximate=True) cubic coefficient


def gelu_derivative(x):
  """d/dx of x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), computed and returned
  in at least float32 (one fused elementwise pass either way)."""
  wide = jnp.promote_types(x.dtype, jnp.float32)
  xw = x.astype(wide)
  s = np.sqrt(2 / np.pi).astype(wide)
  t = jnp.tanh(s * (xw + _C * xw ** 3))
  d = 0.5 * (1 + t) + 0.5 * xw * (1 - t * t) * s * (1 + 3 * _C * xw * xw)
  return d


@jax.custom_vjp
def gelu_recompute(x):
  """jax.nn.gelu(x) (tanh approximation); its backward keeps only x."""
  return jax.nn.gelu(x, approximate=True)


def _fwd(x):
  return jax.nn.gelu(x, approximate=True), (x,)


def _bwd(residuals, g):
  (x,) = residuals
  d = gelu_derivative(x)
  return ((g.astype(d.dtype) * d).astype(g.dtype),)


gelu_recompute.defvjp(_fwd, _bwd)


def gelu(name: str):
  """The MLP's activation for option `name` (GELUS): the same function either way."""
  if name not in GELUS:
    raise ValueError(f"unknown gelu {name!r}")
  return gelu_recompute if name == "recompute" else jax.nn.gelu
