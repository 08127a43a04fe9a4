"""The word problem of a finite group: label each prefix x_1..x_t with its product.

Convention: elements are permutations (row = images of 0..degree-1) and the
product a*b means "apply a first, then b", i.e. (a*b)[i] = b[a[i]] (sympy's
convention). The label at t is x_1 x_2 ... x_t: the state after applying x_1, then
x_2, ..., then x_t. Must not import depthscale.model or depthscale.core.
"""
from __future__ import annotations

import functools
import itertools
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from depthscale.tasks.base import Batch, Task, check_options
from depthscale.errors import UserError

_VALID = {"group": "'A5', 'S5', 'S3', 'parity' or 'Z<m>' with 2 <= m <= 1024; default 'A5'"}
_MAX_CYCLIC = 1024


def _parity_of(perm: tuple[int, ...]) -> int:
  """0 for an even permutation, 1 for an odd one (by counting inversions)."""
  n = len(perm)
  return sum(perm[i] > perm[j] for i in range(n) for j in range(i + 1, n)) % 2


def group_elements(group: str) -> np.ndarray:
  """int32 [G, degree]: the group's permutations in lexicographic order (identity first).

  Raises a one-line ValueError for an unknown group name.
  """
  if not isinstance(group, str):
    raise UserError(f"word_problem: option group must be a str ({_VALID['group']}), got {group!r}")
  if group in ("A5", "S5", "S3"):
    degree = int(group[1])
    perms = list(itertools.permutations(range(degree)))  # lexicographic order
    if group[0] == "A":
      perms = [p for p in perms if _parity_of(p) == 0]
    return np.asarray(perms, np.int32)
  if group == "parity":
    return np.asarray([[0, 1], [1, 0]], np.int32)
  match = re.fullmatch(r"Z([1-9][0-9]*)", group)
  if match and 2 <= int(match.group(1)) <= _MAX_CYCLIC:
    m = int(match.group(1))
    shift_M = np.arange(m, dtype=np.int32)
    return ((shift_M[:, None] + shift_M[None, :]) % m).astype(np.int32)  # row s: i -> i+s
  raise UserError(f"word_problem: bad option group={group!r}; valid: {_VALID['group']}")


def multiplication_table(elements_GxD: np.ndarray) -> np.ndarray:
  """int32 [G, G]: table[a, b] = index of a*b, where (a*b)[i] = b[a[i]].

  Needs the rows of `elements_GxD` in lexicographic order (true of group_elements).
  """
  num, degree = elements_GxD.shape
  weights_D = degree ** np.arange(degree - 1, -1, -1, dtype=np.int64)
  codes_G = elements_GxD.astype(np.int64) @ weights_D  # increasing with lexicographic order
  assert np.all(np.diff(codes_G) > 0), "elements must be sorted and distinct"
  table_GxG = np.empty((num, num), np.int32)
  for a in range(num):
    prod_GxD = elements_GxD[:, elements_GxD[a]]  # row b: i -> b[a[i]]
    idx_G = np.searchsorted(codes_G, prod_GxD.astype(np.int64) @ weights_D)
    if not np.array_equal(codes_G[np.minimum(idx_G, num - 1)], prod_GxD @ weights_D):
      raise ValueError("word_problem: element set is not closed under composition")
    table_GxG[a] = idx_G
  return table_GxG


@functools.partial(jax.jit, static_argnums=(2, 3))
def _sample(key: jax.Array, table_GxG: jax.Array, batch_size: int, length: int) -> Batch:
  """One compiled program per shape, so eager calls are fast too (op-by-op is slow)."""
  x_BxN = jax.random.randint(key, (batch_size, length), 0, table_GxG.shape[0], dtype=jnp.int32)
  # table[a, b] is associative in the group sense, so a parallel prefix scan is exact;
  # the scan calls fn(earlier, later), matching the left-to-right product x_1 ... x_t.
  y_BxN = jax.lax.associative_scan(lambda a, b: table_GxG[a, b], x_BxN, axis=1)
  return Batch(inputs=x_BxN, targets=y_BxN, mask=jnp.ones((batch_size, length), bool))


class WordProblem(Task):
  """Inputs i.i.d. uniform group elements; targets the running products (see module doc)."""

  def __init__(self, **options: Any):
    check_options("word_problem", options, _VALID)
    self._options = {"group": "A5", **options}
    self.elements = group_elements(self._options["group"])
    num = self.elements.shape[0]
    if self._options["group"].startswith("Z"):  # cyclic: (a*b) = shift a+b; skip the [G, G, G] work
      self.table = ((np.arange(num)[:, None] + np.arange(num)[None, :]) % num).astype(np.int32)
    else:
      self.table = multiplication_table(self.elements)
    self.name = "word_problem"
    self.prefix_consistent = True
    self.loss = "xent"
    self.input_vocab = num
    self.input_dim = None
    self.default_length = 128
    self.order = num

  def output_dim(self, length: int) -> int:
    return self.order

  def seq_len(self, length: int) -> int:
    return length

  def sample(self, key: jax.Array, batch_size: int, length: int) -> Batch:
    self.check_length(length)
    return _sample(key, jnp.asarray(self.table), batch_size, length)

  def decode(self, batch: Batch, i: int) -> dict[str, Any]:
    return {
        "inputs": [int(v) for v in np.asarray(batch.inputs[i])],
        "targets": [int(v) for v in np.asarray(batch.targets[i])],
    }
