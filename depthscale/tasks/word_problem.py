"""The word problem of a finite group: label each prefix x_1..x_t with its product.

Elements are permutations (groups.py) and a*b applies a first, then b (sympy's
convention). The label at t is x_1 x_2 ... x_t, the state after applying x_1, then x_2,
..., then x_t, as an element index. The letters x_t are group elements (the paper's
encoding) or a generating set. Must not import depthscale.model or depthscale.core.
"""
from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from depthscale.tasks import groups
from depthscale.tasks.base import Batch, Task, check_options
from depthscale.errors import UserError

_VALID = {"group": f"{groups.SYNTAX}; default 'A5'",
          "inputs": "'elements' (one letter per group element, default) or 'generators'",
          "generators": "with inputs='generators': a generating set in cycle notation on "
                        "the group's points, e.g. '(0 1 2 3 4),(0 1 2)' (default: the "
                        "group's own)",
          "identity": "with inputs='generators': the identity is a letter too (default True)"}


@functools.partial(jax.jit, static_argnums=(3, 4))
def _sample(key: jax.Array, table_GxG: jax.Array, letters_K: jax.Array, batch_size: int,
            length: int) -> Batch:
  """One compiled program per shape, so eager calls are fast too (op-by-op is slow)."""
  x_BxN = jax.random.randint(key, (batch_size, length), 0, letters_K.shape[0], dtype=jnp.int32)
  # table[a, b] is associative in the group sense, so a parallel prefix scan is exact;
  # the scan calls fn(earlier, later), matching the left-to-right product x_1 ... x_t.
  y_BxN = jax.lax.associative_scan(lambda a, b: table_GxG[a, b], letters_K[x_BxN], axis=1)
  return Batch(inputs=x_BxN, targets=y_BxN, mask=jnp.ones((batch_size, length), bool))


class WordProblem(Task):
  """Inputs i.i.d. uniform letters; targets the running products (see module doc).

  inputs="elements" (default): a letter per group element, as Merrill & Sabharwal train.
  inputs="generators": the letters are a generating set (the group's default, or
  `generators`), plus the identity unless identity=False. The identity is a letter by
  default because without it a word's length can fix the coset of its product (over Z60's
  generator +1 the product at position t is always t; over S4's (0 1) and (0 1 2 3), both
  odd, the parity of t is the product's parity), which a model reads from the position
  instead of the word; with it, the length no longer fixes the coset.
  """

  def __init__(self, **options: Any):
    check_options("word_problem", options, _VALID)
    self._options = {"group": "A5", **options}
    inputs = self._options.get("inputs", "elements")
    if inputs not in ("elements", "generators"):
      raise UserError(f"word_problem: bad option inputs={inputs!r}; valid: 'elements', "
                      "'generators'")
    if inputs == "elements" and ({"generators", "identity"} & set(options)):
      raise UserError("word_problem: options generators and identity need "
                      "inputs='generators'")
    identity = self._options.get("identity", True)
    if not isinstance(identity, bool):
      raise UserError(f"word_problem: option identity must be True or False, got {identity!r}")
    group = groups.make_group(self._options["group"])
    self.elements = group.elements
    num = group.order
    self.table = group.product_table()
    if inputs == "elements":
      self.letters = np.arange(num, dtype=np.int32)
    else:
      gens = group.generators
      if "generators" in options:
        if not isinstance(options["generators"], str):
          raise UserError("word_problem: option generators must be a str in cycle notation, "
                          f"e.g. '(0 1 2 3 4),(0 1 2)', got {options['generators']!r}")
        gens = groups.parse_cycles(options["generators"], self.elements.shape[1])
      self.letters = group.index(gens)  # each one an element of the group (else one line)
      if "generators" in options and groups.closure(gens).shape[0] != num:
        raise UserError(f"word_problem: generators {options['generators']!r} do not "
                        f"generate {self._options['group']} ({num} elements)")
      if len(set(self.letters.tolist())) != len(self.letters):
        raise UserError("word_problem: the generators repeat an element; give each once")
      if identity:
        self.letters = np.concatenate([[0], self.letters[self.letters != 0]]).astype(np.int32)
    self.name = "word_problem"
    self.prefix_consistent = True
    self.loss = "xent"
    self.input_vocab = int(self.letters.shape[0])
    self.input_dim = None
    self.default_length = 128
    self.order = num

  def output_dim(self, length: int) -> int:
    return self.order

  def seq_len(self, length: int) -> int:
    return length

  def sample(self, key: jax.Array, batch_size: int, length: int) -> Batch:
    self.check_length(length)
    return _sample(key, jnp.asarray(self.table), jnp.asarray(self.letters), batch_size,
                   length)

  def decode(self, batch: Batch, i: int) -> dict[str, Any]:
    return {
        "inputs": [int(v) for v in np.asarray(batch.inputs[i])],
        "targets": [int(v) for v in np.asarray(batch.targets[i])],
    }
