"""Tests of the k-hop sampler against a brute-force pure-Python reference.

The reference loops over positions and searches backwards; it shares no code with
depthscale/tasks/khop.py.
"""
from __future__ import annotations

import functools

import jax
import numpy as np
import pytest
import scipy.stats

from depthscale.tasks.khop import KHop


def reference_hops(x: list[int], k: int) -> list[int | None]:
  """hop_k(x)_i for every i, None where undefined."""
  n = len(x)
  find = []
  for i in range(n):
    j = i - 1
    while j >= 0 and x[j] != x[i]:
      j -= 1
    find.append(j + 1 if j >= 0 else None)
  out = []
  for i in range(n):
    p = i
    for _ in range(k):
      p = find[p]
      if p is None:
        break
    out.append(None if p is None else x[p])
  return out


@functools.lru_cache(maxsize=None)
def _sample(batch: int, length: int, seed: int = 0, **options):
  task = KHop(**options)
  out = jax.jit(task.sample, static_argnums=(1, 2))(jax.random.PRNGKey(seed), batch, length)
  return task, out, np.asarray(out.inputs), np.asarray(out.targets), np.asarray(out.mask)


def _split(task, x, y, mask):
  """(k per row, string [B, N], targets [B, N]) whichever the mode."""
  if task.k is None:
    assert not mask[:, 0].any() and mask[:, 1:].all()
    assert (y[:, 0] == task.alphabet).all()
    return x[:, 0] - (task.alphabet + 1), x[:, 1:], y[:, 1:]
  assert mask.all()
  return np.full(len(x), task.k), x, y


def _check_against_reference(task, x, y, mask, rows):
  k_B, s_BxN, t_BxN = _split(task, x, y, mask)
  assert ((0 <= s_BxN) & (s_BxN < task.alphabet)).all()
  null = task.alphabet
  for b in rows:
    ref = reference_hops(s_BxN[b].tolist(), int(k_B[b]))
    got = [None if v == null else int(v) for v in t_BxN[b]]
    assert got == ref, (b, int(k_B[b]))


@pytest.mark.parametrize("k", [0, 1, 2, 3, 8, 16])
def test_fixed_k_matches_reference(k):
  task, _, x, y, mask = _sample(200, 100, k=k)
  assert x.shape == y.shape == mask.shape == (200, 100) == (200, task.seq_len(100))
  _check_against_reference(task, x, y, mask, range(200))


@pytest.mark.parametrize("alphabet, length, no_repeat", [
    (2, 100, True), (4, 100, True), (8, 100, True), (4, 16, True), (8, 16, True),
    (2, 16, False), (4, 100, False),
])
def test_random_k_matches_reference(alphabet, length, no_repeat):
  task, _, x, y, mask = _sample(300, length, alphabet=alphabet, no_repeat=no_repeat)
  assert x.shape == (300, length + 1) == (300, task.seq_len(length))
  assert x.max() < task.input_vocab and y.max() < task.output_dim(length)
  _check_against_reference(task, x, y, mask, range(300))
  s_BxN = x[:, 1:]
  repeats = (s_BxN[:, 1:] == s_BxN[:, :-1]).mean()
  if no_repeat:
    assert repeats == 0.0
  else:
    assert abs(repeats - 1 / alphabet) < 0.05


def test_letters_and_k_uniform():
  task, _, x, y, mask = _sample(2000, 100)
  k_B, s_BxN, _ = _split(task, x, y, mask)
  # Columns are independent across sequences, so per-column chi-square tests are exact.
  for col in (0, 1, 50, 99):
    counts = np.bincount(s_BxN[:, col], minlength=4)
    assert scipy.stats.chisquare(counts).pvalue > 1e-3, col
  pairs = s_BxN[:, 49] * 4 + s_BxN[:, 50]  # the 12 ordered pairs of distinct letters
  distinct = [a * 4 + b for a in range(4) for b in range(4) if a != b]
  counts = np.bincount(pairs, minlength=16)[distinct]
  assert counts.sum() == 2000 and scipy.stats.chisquare(counts).pvalue > 1e-3
  counts_k = np.bincount(k_B, minlength=17)
  assert counts_k.shape == (17,) and scipy.stats.chisquare(counts_k).pvalue > 1e-3


def test_defined_fraction_not_degenerate():
  # Defined fraction (alphabet 4, no_repeat, N = 100), measured at batch 20000 per fixed k:
  # k=1 0.960, k=2 0.930, k=4 0.870, k=8 0.750, k=16 0.510. These are exact: find is
  # injective, the first occurrences of the A letters are undefined for k = 1, and each
  # further hop adds the A - 1 positions that find maps onto a first occurrence at p > 0,
  # so a sequence has A + (A - 1)(k - 1) undefined positions (when its chains fit in N).
  task, _, x, y, mask = _sample(2000, 100)
  k_B, _, t_BxN = _split(task, x, y, mask)
  undefined_B = (t_BxN == task.alphabet).sum(axis=1)
  frac = {k: 1 - float(undefined_B[k_B == k].mean()) / 100 for k in (1, 2, 4, 8, 16)}
  print("defined fraction by k:", {k: round(v, 3) for k, v in frac.items()})
  assert frac[16] > 0.2 and frac[1] > frac[2] > frac[4] > frac[8] > frac[16]
  assert (undefined_B[k_B == 0] == 0).all()
  for k in range(1, 17):
    assert np.median(undefined_B[k_B == k]) == 4 + 3 * (k - 1), k


def test_decode():
  task, batch, x, y, mask = _sample(2000, 100)
  out = task.decode(batch, 7)
  assert set(out) == {"k", "string", "targets"}
  assert type(out["k"]) is int and out["k"] == int(x[7, 0]) - 5
  assert len(out["string"]) == len(out["targets"]) == 100
  assert all(c in "abcd" for c in out["string"])
  letters = ["abcd".index(c) for c in out["string"]]
  expected = reference_hops(letters, out["k"])
  assert out["targets"] == [None if v is None else "abcd"[v] for v in expected]
  fixed, fixed_batch, *_ = _sample(200, 100, k=3)
  assert fixed.decode(fixed_batch, 0)["k"] == 3


def test_attributes():
  task = KHop()
  assert task.options() == {"k": None, "k_max": 16, "alphabet": 4, "no_repeat": True}
  assert (task.name, task.loss, task.input_vocab, task.input_dim) == ("khop", "xent", 22, None)
  assert task.default_length == 100 and task.output_dim(100) == 5 and task.seq_len(100) == 101
  fixed = KHop(k=2, alphabet=8)
  assert fixed.seq_len(100) == 100 and fixed.output_dim(100) == 9 and fixed.input_vocab == 26


def test_jit_vmap_determinism():
  task = KHop(alphabet=4)
  key = jax.random.PRNGKey(5)
  eager = task.sample(key, 8, 10)
  jitted = jax.jit(task.sample, static_argnums=(1, 2))(key, 8, 10)
  for field in ("inputs", "targets", "mask"):
    np.testing.assert_array_equal(getattr(eager, field), getattr(jitted, field))
  np.testing.assert_array_equal(eager.inputs, task.sample(key, 8, 10).inputs)
  assert not np.array_equal(eager.inputs, task.sample(jax.random.PRNGKey(6), 8, 10).inputs)
  keys = jax.random.split(key, 3)
  stacked = jax.vmap(lambda k: task.sample(k, 8, 10))(keys)
  assert stacked.inputs.shape == (3, 8, 11) and stacked.mask.shape == (3, 8, 11)
  np.testing.assert_array_equal(stacked.targets[2], task.sample(keys[2], 8, 10).targets)


@pytest.mark.parametrize("options", [
    {"k": -1}, {"k": 17}, {"k": 1.5}, {"k": True}, {"k_max": 0}, {"k_max": "16"},
    {"alphabet": 1}, {"alphabet": 4.0}, {"no_repeat": 1}, {"K": 2},
])
def test_bad_options(options):
  with pytest.raises(ValueError) as err:
    KHop(**options)
  msg = str(err.value)
  assert "\n" not in msg and next(iter(options)) in msg


@pytest.mark.parametrize("length", [0, -3, 1.0, None, 2**30])
def test_bad_length(length):
  with pytest.raises(ValueError) as err:
    KHop().sample(jax.random.PRNGKey(0), 2, length)
  assert "\n" not in str(err.value)
