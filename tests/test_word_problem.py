"""Tests of the word-problem sampler against sympy and brute-force tuple composition.

The references here share no code with depthscale/tasks/word_problem.py.
"""
from __future__ import annotations

import functools

import jax
import numpy as np
import pytest
import scipy.stats
from sympy.combinatorics import Permutation, PermutationGroup
from sympy.combinatorics.named_groups import AlternatingGroup, CyclicGroup, SymmetricGroup

from depthscale.tasks.word_problem import WordProblem

SYMPY_GROUPS = {
    "A5": lambda: AlternatingGroup(5),
    "S5": lambda: SymmetricGroup(5),
    "S3": lambda: SymmetricGroup(3),
    "parity": lambda: SymmetricGroup(2),
    "Z5": lambda: CyclicGroup(5),
    "Z7": lambda: CyclicGroup(7),
}


@functools.lru_cache(maxsize=None)
def _sample(group: str, seed: int, batch: int, length: int):
  task = WordProblem(group=group)
  fn = jax.jit(task.sample, static_argnums=(1, 2))
  out = fn(jax.random.PRNGKey(seed), batch, length)
  return task, out, np.asarray(out.inputs), np.asarray(out.targets), np.asarray(out.mask)


@pytest.mark.parametrize("group", sorted(SYMPY_GROUPS))
def test_elements_are_exactly_the_group(group):
  task = WordProblem(group=group)
  elems = [tuple(int(v) for v in row) for row in task.elements]
  ref = {tuple(p.array_form) for p in SYMPY_GROUPS[group]().generate()}
  assert len(elems) == len(set(elems)) == len(ref)
  assert set(elems) == ref
  assert elems[0] == tuple(range(task.elements.shape[1]))  # identity first
  assert elems == sorted(elems)  # deterministic order
  assert PermutationGroup([Permutation(list(e)) for e in elems]).order() == len(elems)
  if group == "A5":
    assert len(elems) == 60 and all(Permutation(list(e)).is_even for e in elems)
  assert task.input_vocab == task.output_dim(10) == len(elems)
  assert task.seq_len(10) == 10 and task.default_length == 128 and task.loss == "xent"


def test_element_order_is_stable_across_instances():
  np.testing.assert_array_equal(WordProblem().elements, WordProblem(group="A5").elements)


@pytest.mark.parametrize("group", ["A5", "S5", "S3", "parity", "Z5"])
def test_running_products_match_brute_force(group):
  task, _, x, y, mask = _sample(group, 0, 2000, 32)
  assert x.shape == y.shape == mask.shape == (2000, 32)
  assert x.dtype == y.dtype == np.int32 and mask.all()
  elems = [tuple(int(v) for v in row) for row in task.elements]
  index = {e: i for i, e in enumerate(elems)}
  # Reference 1: brute-force tuple composition, "apply the running state, then x_t".
  # The element table is a tiny [G, G] here, built from tuples, then the scan is a loop.
  compose = np.array([[index[tuple(b[a[i]] for i in range(len(a)))] for b in elems] for a in elems])
  state = x[:, 0].copy()
  ref = np.empty_like(y)
  ref[:, 0] = state
  for t in range(1, x.shape[1]):
    state = compose[state, x[:, t]]
    ref[:, t] = state
  np.testing.assert_array_equal(y, ref)
  # Reference 2: sympy Permutation products (p*q applies p first) on a subset.
  perms = [Permutation(list(e)) for e in elems]
  for row in range(0, 2000, 97):
    acc = Permutation(list(range(len(elems[0]))))
    for t in range(x.shape[1]):
      acc = acc * perms[x[row, t]]
      assert tuple(acc.array_form) == elems[y[row, t]]


def test_a5_is_noncommutative_and_convention_is_apply_left_first():
  task = WordProblem(group="A5")
  a, b = task.elements[1], task.elements[5]
  ab = [int(b[a[i]]) for i in range(5)]  # apply a, then b
  ba = [int(a[b[i]]) for i in range(5)]
  assert ab != ba
  assert list(task.elements[task.table[1, 5]]) == ab
  assert list(task.elements[task.table[5, 1]]) == ba


@pytest.mark.parametrize("group", ["A5", "S3", "Z5"])
def test_inputs_uniform(group):
  task, _, x, _, _ = _sample(group, 0, 2000, 32)  # 64000 draws
  counts = np.bincount(x.ravel(), minlength=task.input_vocab)
  assert counts.shape == (task.input_vocab,)
  p = scipy.stats.chisquare(counts).pvalue
  assert p > 1e-3, (group, p)


def test_jit_vmap_determinism():
  task = WordProblem(group="S5")
  key = jax.random.PRNGKey(3)
  eager = task.sample(key, 8, 10)
  jitted = jax.jit(task.sample, static_argnums=(1, 2))(key, 8, 10)
  for field in ("inputs", "targets", "mask"):
    np.testing.assert_array_equal(getattr(eager, field), getattr(jitted, field))
  again = task.sample(key, 8, 10)
  np.testing.assert_array_equal(eager.targets, again.targets)
  other = task.sample(jax.random.PRNGKey(4), 8, 10)
  assert not np.array_equal(eager.inputs, other.inputs)
  keys = jax.random.split(key, 3)
  stacked = jax.vmap(lambda k: task.sample(k, 8, 10))(keys)
  assert stacked.inputs.shape == (3, 8, 10) and stacked.mask.shape == (3, 8, 10)
  single = task.sample(keys[1], 8, 10)
  np.testing.assert_array_equal(stacked.targets[1], single.targets)


def test_decode_plain_python():
  task, batch, _, _, _ = _sample("S3", 0, 2000, 32)
  out = task.decode(batch, 2)
  assert set(out) == {"inputs", "targets"}
  assert all(type(v) is int for v in out["inputs"] + out["targets"])
  assert out["inputs"] == np.asarray(batch.inputs[2]).tolist()
  assert out["targets"][0] == out["inputs"][0]


@pytest.mark.parametrize("options", [
    {"group": "A6"}, {"group": "Z1"}, {"group": "Zx"}, {"group": "Z0"}, {"group": 5},
    {"group": "Z99999"}, {"gruop": "A5"},
])
def test_bad_options(options):
  with pytest.raises(ValueError) as err:
    WordProblem(**options)
  msg = str(err.value)
  assert "\n" not in msg and ("group" in msg or "gruop" in msg)


@pytest.mark.parametrize("length", [0, -1, 2.5, True])
def test_bad_length(length):
  with pytest.raises(ValueError) as err:
    WordProblem().sample(jax.random.PRNGKey(0), 2, length)
  assert "\n" not in str(err.value)


def test_options_roundtrip():
  assert WordProblem().options() == {"group": "A5"}
  assert WordProblem(group="Z7").options() == {"group": "Z7"}
  assert "Z7" in repr(WordProblem(group="Z7"))
