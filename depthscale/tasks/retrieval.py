"""The retrieval problem, minimal formulation (Musat, "Stacked Attention Heads"): follow chains.

A sampler of continuous (vector) sequences with regression targets at the query positions.
Must not import depthscale.model, depthscale.core or anything above tasks.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from depthscale.tasks import base
from depthscale.errors import UserError

POSITION_BASE = 10000.0  # wavelength base of the sinusoidal ("rotary-style") pair code

_VALID = {
    "chains": "int >= 1, default 4 (N)",
    "dim": "int >= 1, default 4 (K)",
    "implicit_curriculum": "bool, default True; target the whole chain x_1..x_D, else only x_D",
}


def _check_int(name: str, value: Any) -> int:
  if not isinstance(value, int) or isinstance(value, bool) or value < 1:
    raise UserError(f"retrieval: {name} must be an int >= 1, got {value!r}")
  return value


def position_code(num: int, k: int) -> np.ndarray:
  """[num, k] sinusoidal code of indices 0..num-1: dims 2j, 2j+1 = sin, cos(p / base^(2j/k))."""
  p_P = np.arange(num, dtype=np.float64)[:, None]
  j_K = np.arange(k)
  angle_PxK = p_P / POSITION_BASE ** (2 * (j_K // 2) / k)
  return np.where(j_K % 2 == 0, np.sin(angle_PxK), np.cos(angle_PxK)).astype(np.float32)


class Retrieval(base.Task):
  """N chains x_0 -> x_1 -> ... -> x_D of fresh N(0, 1) vectors in R^K; length = D.

  Sequence (T = N(2D + 1) positions): for step i = 1..D, the N pairs (x_{i-1}, x_i) of all
  chains in a fresh random chain order, two positions per pair; then the N queries x_0 in
  a random order. Each position holds [symbol vector (K) | position code (K)], input_dim
  2K. Pair p (0..ND-1 in sequence order) has code position_code(p); both tokens share it.
  Query q (0..N-1) has code position_code(ND + q), one index per query.
  Targets (mse) at the query positions only, zeros elsewhere: with implicit_curriculum the
  chain x_1..x_D concatenated (output_dim D*K), else x_D (output_dim K). Mask: the N queries.
  default_length 5 is the paper's IC setting; its non-IC experiments use D = 3.
  """

  def __init__(self, **options):
    base.check_options("retrieval", options, _VALID)
    n = _check_int("chains", options.get("chains", 4))
    k = _check_int("dim", options.get("dim", 4))
    ic = options.get("implicit_curriculum", True)
    if not isinstance(ic, bool):
      raise UserError(f"retrieval: implicit_curriculum must be a bool, got {ic!r}")
    self._options = {"chains": n, "dim": k, "implicit_curriculum": ic}
    self.name = "retrieval"
    self.scaled_by = "loss"  # regression: the paper's measures are losses, not n*
    self.loss = "mse"
    self.input_vocab = None
    self.input_dim = 2 * k
    self.default_length = 5
    self._sample_jit = jax.jit(self._sample, static_argnums=(1, 2))  # eager calls compile once

  def output_dim(self, length: int) -> int:
    return (length if self._options["implicit_curriculum"] else 1) * self._options["dim"]

  def seq_len(self, length: int) -> int:
    return self._options["chains"] * (2 * length + 1)

  def _one(self, z_Z: jax.Array, d: int):
    """symbols_TxK and targets_NxO (query rows only) of one example from normals z_Z."""
    n, k = self._options["chains"], self._options["dim"]
    x_NxSxK = z_Z[:n * (d + 1) * k].reshape(n, d + 1, k)  # S = d + 1 symbols per chain
    order_DxN = jnp.argsort(z_Z[n * (d + 1) * k:n * (d + 1) * k + d * n].reshape(d, n), axis=1)
    query_N = jnp.argsort(z_Z[-n:])  # i.i.d. normals sort into a uniform permutation
    step_D = jnp.arange(d)
    a_DxNxK = x_NxSxK[order_DxN, step_D[:, None]]
    b_DxNxK = x_NxSxK[order_DxN, step_D[:, None] + 1]
    pairs_PxK = jnp.stack([a_DxNxK, b_DxNxK], axis=2).reshape(2 * d * n, k)
    symbols_TxK = jnp.concatenate([pairs_PxK, x_NxSxK[query_N, 0]], axis=0)
    if self._options["implicit_curriculum"]:
      return symbols_TxK, x_NxSxK[query_N, 1:].reshape(n, d * k)
    return symbols_TxK, x_NxSxK[query_N, d]

  def _sample(self, key: jax.Array, batch_size: int, length: int) -> base.Batch:
    n, k, d = self._options["chains"], self._options["dim"], length
    t, o = self.seq_len(d), self.output_dim(d)
    code_TxK = position_code(n * d + n, k)[np.concatenate([np.arange(2 * n * d) // 2,
                                                           n * d + np.arange(n)])]
    z = n * (d + 1) * k + d * n + n  # one flat draw: XLA:CPU compiles each threefry call slowly
    z_BxZ = jax.random.normal(key, (batch_size * z,), jnp.float32).reshape(batch_size, z)
    symbols_BxTxK, targets_BxNxO = jax.vmap(lambda z_Z: self._one(z_Z, d))(z_BxZ)
    code_BxTxK = jnp.broadcast_to(jnp.asarray(code_TxK), (batch_size, t, k))
    inputs_BxTxI = jnp.concatenate([symbols_BxTxK, code_BxTxK], axis=-1)
    pad_BxPxO = jnp.zeros((batch_size, t - n, o), jnp.float32)
    targets_BxTxO = jnp.concatenate([pad_BxPxO, targets_BxNxO], axis=1)
    mask_BxT = jnp.broadcast_to(jnp.arange(t)[None, :] >= t - n, (batch_size, t))
    return base.Batch(inputs=inputs_BxTxI, targets=targets_BxTxO, mask=mask_BxT)

  def measure_names(self, length: int) -> tuple[str, ...]:
    """With the implicit curriculum, the paper's partial losses: partial_loss_i, the mean
    squared error of chain position x_i (i = 1..D) at the queries."""
    if not self._options["implicit_curriculum"]:
      return ()
    return tuple(f"partial_loss_{i}" for i in range(1, length + 1))

  def measures(self, out: jax.Array, batch: base.Batch) -> dict[str, jax.Array]:
    k = self._options["dim"]
    d = out.shape[-1] // k
    if not self._options["implicit_curriculum"]:
      return {}
    err_BxTxD = jnp.square(out - batch.targets).reshape(out.shape[:2] + (d, k)).mean(-1)
    m_BxT = batch.mask.astype(err_BxTxD.dtype)
    loss_D = (err_BxTxD * m_BxT[..., None]).sum((0, 1)) / jnp.maximum(m_BxT.sum(), 1.0)
    return {f"partial_loss_{i + 1}": loss_D[i] for i in range(d)}

  def sample(self, key: jax.Array, batch_size: int, length: int) -> base.Batch:
    self.check_length(length)
    return self._sample_jit(key, batch_size, length)

  def decode(self, batch: base.Batch, i: int) -> dict[str, Any]:
    n, k = self._options["chains"], self._options["dim"]
    sym_TxK = np.asarray(batch.inputs[i])[:, :k].astype(float)
    tgt_NxO = np.asarray(batch.targets[i])[-n:].astype(float)
    num_pairs = (sym_TxK.shape[0] - n) // 2
    pairs = [(sym_TxK[2 * p].tolist(), sym_TxK[2 * p + 1].tolist()) for p in range(num_pairs)]
    queries = [sym_TxK[2 * num_pairs + q].tolist() for q in range(n)]
    targets = [[row[j:j + k].tolist() for j in range(0, len(row), k)] for row in tgt_NxO]
    return {"pairs": pairs, "queries": queries, "targets": targets}
