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


# Words over generators (issue 19). References: sympy's permutation groups, built from the
# generators written in cycle notation here, never from the task's elements or table.
from sympy.combinatorics.group_constructs import DirectProduct  # noqa: E402

GENERATED = {  # options -> (sympy group, the letters' permutations besides the identity)
    "A5": (dict(group="A5", inputs="generators"),
           lambda: AlternatingGroup(5), [[[0, 1, 2, 3, 4]], [[0, 1, 2]]], 5),
    "Z60": (dict(group="Z60", inputs="generators"),
            lambda: CyclicGroup(60), [[list(range(60))]], 60),
    "A4xZ5": (dict(group="A4xZ5", inputs="generators", generators="(0 1 2)(4 5 6 7 8),(0 1)(2 3)"),
              lambda: DirectProduct(AlternatingGroup(4), CyclicGroup(5)),
              [[[0, 1, 2], [4, 5, 6, 7, 8]], [[0, 1], [2, 3]]], 9),
    "perm": (dict(group="perm:(0 1),(0 1 2 3 4)", inputs="generators"),
             lambda: SymmetricGroup(5), [[[0, 1]], [[0, 1, 2, 3, 4]]], 5),
}


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generator_words_match_sympy_composition(name):
  options, ref_group, cycles, degree = GENERATED[name]
  task = WordProblem(**options)
  gens = [Permutation(c, size=degree) for c in cycles]
  letters = [Permutation(list(range(degree)))] + gens  # the identity first, then as written
  assert task.input_vocab == len(letters) and task.output_dim(8) == ref_group().order()
  elems = [tuple(int(v) for v in row) for row in task.elements]
  assert set(elems) == {tuple(p.array_form) for p in ref_group().generate()}
  batch = jax.jit(task.sample, static_argnums=(1, 2))(jax.random.PRNGKey(1), 200, 24)
  x, y = np.asarray(batch.inputs), np.asarray(batch.targets)
  assert x.min() >= 0 and x.max() == len(letters) - 1
  for row in range(0, 200, 7):
    acc = Permutation(list(range(degree)))
    for t in range(24):
      acc = acc * letters[x[row, t]]  # sympy: p*q applies p first
      assert tuple(acc.array_form) == elems[y[row, t]], (name, row, t)


def test_group_orders_and_closure():
  for options, order in [(dict(group="A5"), 60), (dict(group="A4xZ5"), 60),
                         (dict(group="S5"), 120), (dict(group="perm:(0 1 2 3 4),(0 1 2)"), 60),
                         (dict(group="A4"), 12), (dict(group="S4"), 24)]:
    task = WordProblem(**options)
    elems = {tuple(int(v) for v in row) for row in task.elements}
    assert len(elems) == task.order == order, options
    sym = PermutationGroup([Permutation(list(e)) for e in elems])
    assert sym.order() == order  # closed: the elements generate nothing more
  assert not PermutationGroup([Permutation(list(e)) for e in WordProblem(group="A5").elements]
                              ).is_solvable
  a4z5 = PermutationGroup([Permutation(list(e)) for e in WordProblem(group="A4xZ5").elements])
  assert a4z5.is_solvable and not a4z5.is_abelian


def test_named_group_elements_unchanged_by_generator_path():
  for group in ("A5", "S5", "S3"):
    gens = WordProblem(group=group, inputs="generators")
    by_closure = WordProblem(group="perm:" + {"A5": "(0 1 2 3 4),(0 1 2)", "S5": "(0 1),(0 1 2 3 4)",
                                              "S3": "(0 1),(0 1 2)"}[group])
    np.testing.assert_array_equal(gens.elements, by_closure.elements)
    np.testing.assert_array_equal(gens.table, by_closure.table)


def test_identity_letter_option():
  # Without the identity, a word over Z60's +1 has product t at position t (1-based).
  task = WordProblem(group="Z60", inputs="generators", identity=False)
  assert task.input_vocab == 1
  y = np.asarray(task.sample(jax.random.PRNGKey(0), 4, 70).targets)
  shift = [int(task.elements[v][0]) for v in y[0]]
  assert shift == [(t + 1) % 60 for t in range(70)]
  with_id = WordProblem(group="Z60", inputs="generators")
  assert with_id.input_vocab == 2


@pytest.mark.parametrize("options", [
    {"group": "A5", "inputs": "letters"}, {"group": "A5", "generators": "(0 1)"},
    {"group": "A5", "inputs": "generators", "generators": "(0 1)"},
    {"group": "A5", "inputs": "generators", "generators": "(0 1 2)"},
    {"group": "A5", "inputs": "generators", "generators": "0 1 2"},
    {"group": "A5", "inputs": "generators", "identity": "yes"},
    {"group": "perm:(0 1)(1 2)"}, {"group": "perm:"}, {"group": "A4xQ8"}, {"group": "perm:(0 99)"},
    {"group": "A4x"}, {"group": "xA4"}, {"group": "perm:()"}, {"group": "Z1024xZ1024"},
    {"group": "A5", "inputs": "generators", "generators": "(0 5 1)"},
    {"group": "A5", "inputs": "generators", "generators": "(0 1 2 3 4),(0 1 2 3 4),(0 1 2)"},
])
def test_bad_generator_options(options):
  with pytest.raises(ValueError) as err:
    WordProblem(**options)
  assert "\n" not in str(err.value) and str(err.value).startswith("word_problem:")
