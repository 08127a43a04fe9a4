"""k-hop induction heads: hop_k(X)_i = X_{find^k(i)}, find(i) = 1 + last j < i with X_j = X_i.

Token ids: letters 0..alphabet-1; output NULL = alphabet (undefined hop); the prefix
token for k (random-k mode only) is alphabet + 1 + k. k = 1 is associative recall.
Must not import depthscale.model or depthscale.core.
"""
from __future__ import annotations

import functools
import string
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from depthscale.tasks.base import Batch, Task, check_options
from depthscale.errors import UserError

_VALID = {
    "k": "int 0 <= k <= k_max, or None to draw k from 0..k_max per sequence as a prefix token;"
         " default None",
    "k_max": "int >= 1; default 16",
    "alphabet": "int >= 2; default 4",
    "no_repeat": "bool, no two equal neighbouring letters; default True",
}


def _is_int(v: Any) -> bool:
  return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _bad(name: str, value: Any) -> UserError:
  return UserError(f"khop: bad option {name}={value!r}; valid: {_VALID[name]}")


def hop_positions(x_BxN: jax.Array, k_B: jax.Array, num_steps: int) -> jax.Array:
  """int32 [B, N]: find^k(i) per position (-1 where undefined), k_B <= num_steps per row."""
  n = x_BxN.shape[1]
  pos_N = jnp.arange(n, dtype=jnp.int32)
  earlier_NxN = pos_N[None, :] < pos_N[:, None]  # [i, j]: j < i
  same_BxNxN = (x_BxN[:, :, None] == x_BxN[:, None, :]) & earlier_NxN[None]
  last_BxN = jnp.max(jnp.where(same_BxNxN, pos_N[None, None, :], -1), axis=2)
  find_BxN = jnp.where(last_BxN >= 0, last_BxN + 1, -1)

  def step(s, pos_BxN):
    nxt_BxN = jnp.take_along_axis(find_BxN, jnp.maximum(pos_BxN, 0), axis=1)
    nxt_BxN = jnp.where(pos_BxN >= 0, nxt_BxN, -1)  # undefined stays undefined
    return jnp.where(s < k_B[:, None], nxt_BxN, pos_BxN)

  start_BxN = jnp.broadcast_to(pos_N, x_BxN.shape)
  return jax.lax.fori_loop(0, num_steps, step, start_BxN)


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5, 6))
def _sample(key: jax.Array, batch_size: int, length: int, alphabet: int, no_repeat: bool,
            k: int | None, k_max: int) -> Batch:
  """The sampler; one compiled program per shape and options, so eager calls are fast too."""
  null = alphabet
  # One draw for everything (threefry is costly to compile): column 0 is k (random-k
  # mode), columns 1.. the letters, or with no_repeat X_0 then steps u_i in 0..alphabet-2.
  high_T = [k_max + 1] + [alphabet] + [alphabet - 1 if no_repeat else alphabet] * (length - 1)
  draw_BxT = jax.random.randint(key, (batch_size, length + 1), 0, jnp.asarray(high_T, jnp.int32)[None],
                                dtype=jnp.int32)
  if no_repeat:  # X_i = X_{i-1} + 1 + u_i (mod alphabet): uniform over letters != X_{i-1}
    incr_BxN = draw_BxT[:, 1:].at[:, 1:].add(1)  # cumsum < alphabet * length: no int32 overflow
    x_BxN = jnp.cumsum(incr_BxN, axis=1, dtype=jnp.int32) % alphabet
  else:
    x_BxN = draw_BxT[:, 1:]
  k_B = draw_BxT[:, 0] if k is None else jnp.full((batch_size,), k, jnp.int32)
  pos_BxN = hop_positions(x_BxN, k_B, k_max if k is None else k)
  letter_BxN = jnp.take_along_axis(x_BxN, jnp.maximum(pos_BxN, 0), axis=1)
  y_BxN = jnp.where(pos_BxN >= 0, letter_BxN, null).astype(jnp.int32)
  if k is not None:
    return Batch(inputs=x_BxN, targets=y_BxN, mask=jnp.ones((batch_size, length), bool))
  inputs_BxT = jnp.concatenate([(alphabet + 1 + k_B)[:, None], x_BxN], axis=1)
  targets_BxT = jnp.concatenate([jnp.full((batch_size, 1), null, jnp.int32), y_BxN], axis=1)
  mask_BxT = jnp.concatenate(
      [jnp.zeros((batch_size, 1), bool), jnp.ones((batch_size, length), bool)], axis=1)
  return Batch(inputs=inputs_BxT, targets=targets_BxT, mask=mask_BxT)


class KHop(Task):
  """A random string; the target at each position is its k-hop letter or NULL."""

  def __init__(self, **options: Any):
    check_options("khop", options, _VALID)
    opts = {"k": None, "k_max": 16, "alphabet": 4, "no_repeat": True, **options}
    if not _is_int(opts["k_max"]) or opts["k_max"] < 1:
      raise _bad("k_max", opts["k_max"])
    if opts["k"] is not None and (not _is_int(opts["k"]) or not 0 <= opts["k"] <= opts["k_max"]):
      raise _bad("k", opts["k"])
    if not _is_int(opts["alphabet"]) or opts["alphabet"] < 2:
      raise _bad("alphabet", opts["alphabet"])
    if not isinstance(opts["no_repeat"], (bool, np.bool_)):
      raise _bad("no_repeat", opts["no_repeat"])
    for name in ("k_max", "alphabet") + (("k",) if opts["k"] is not None else ()):
      opts[name] = int(opts[name])
    opts["no_repeat"] = bool(opts["no_repeat"])
    self._options = opts
    self.k = opts["k"]
    self.k_max = opts["k_max"]
    self.alphabet = opts["alphabet"]
    self.no_repeat = opts["no_repeat"]
    self.null = self.alphabet
    self.name = "khop"
    self.prefix_consistent = True
    self.loss = "xent"
    self.input_vocab = self.alphabet + 2 + self.k_max
    self.input_dim = None
    self.default_length = 100

  def output_dim(self, length: int) -> int:
    return self.alphabet + 1

  def seq_len(self, length: int) -> int:
    return length + 1 if self.k is None else length

  def k_token(self, k: int) -> int:
    """The input id of the prefix token announcing `k` (random-k mode)."""
    return self.alphabet + 1 + k

  def sample(self, key: jax.Array, batch_size: int, length: int) -> Batch:
    self.check_length(length)
    if self.alphabet * length >= 2**31:
      raise UserError(f"khop: length * alphabet must be < 2**31, got length={length}")
    return _sample(key, batch_size, length, self.alphabet, self.no_repeat, self.k, self.k_max)

  def levels(self, batch: Batch) -> tuple[jax.Array, int] | None:
    """k of each sequence (read off its prefix token) in random-k mode, else None."""
    if self.k is not None:
      return None
    return batch.inputs[:, 0] - self.k_token(0), self.k_max + 1

  def _letter(self, v: int) -> str:
    return string.ascii_lowercase[v] if self.alphabet <= 26 else f"t{v}"

  def decode(self, batch: Batch, i: int) -> dict[str, Any]:
    inputs_T = [int(v) for v in np.asarray(batch.inputs[i])]
    targets_T = [int(v) for v in np.asarray(batch.targets[i])]
    if self.k is None:
      k, inputs_T, targets_T = inputs_T[0] - self.k_token(0), inputs_T[1:], targets_T[1:]
    else:
      k = self.k
    return {
        "k": k,
        "string": [self._letter(v) for v in inputs_T],
        "targets": [None if v == self.null else self._letter(v) for v in targets_T],
    }
