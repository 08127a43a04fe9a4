"""Retrieval sampler: targets against chain following, interleaving, shuffles, N(0,1), jit/vmap."""
import itertools

import jax
import numpy as np
import pytest
import scipy.stats

from depthscale.tasks.retrieval import Retrieval, position_code


# (implicit_curriculum, D, N, K); each costs one small XLA compile.
SETTINGS = [(True, 1, 1, 2), (True, 3, 4, 4), (True, 5, 4, 4), (True, 5, 4, 2), (True, 8, 4, 2),
            (True, 8, 1, 4), (False, 1, 4, 4), (False, 3, 4, 4), (False, 3, 2, 3),
            (False, 5, 1, 2), (False, 8, 4, 4)]
_CACHE = {}


def _batch(ic, d, n, k, batch_size=400):
  key = (ic, d, n, k, batch_size)
  if key not in _CACHE:
    task = Retrieval(chains=n, dim=k, implicit_curriculum=ic)
    _CACHE[key] = task, jax.device_get(task.sample(jax.random.key(d * 10 + n), batch_size, d))
  return _CACHE[key]


def _follow(ex, d):
  """Reference: chain following over the decoded pairs; also each pair's step (depth)."""
  nxt = {tuple(a): b for a, b in ex["pairs"]}
  assert len(nxt) == len(ex["pairs"])  # first vectors are distinct symbols
  depth, answers = {}, []
  for q in ex["queries"]:
    x, chain = q, []
    for step in range(d):
      depth[tuple(x)] = step
      x = nxt[tuple(x)]
      chain.append(x)
    assert tuple(x) not in nxt  # the chain ends after D steps
    answers.append(chain)
  return answers, [depth[tuple(a)] for a, _ in ex["pairs"]]


@pytest.mark.parametrize("ic,d,n,k", SETTINGS)
def test_targets_match_chain_following(ic, d, n, k):
  task, batch = _batch(ic, d, n, k)
  t, o = task.seq_len(d), task.output_dim(d)
  assert t == n * (2 * d + 1) and o == (d * k if ic else k)
  assert batch.inputs.shape == (400, t, 2 * k) and batch.targets.shape == (400, t, o)
  assert batch.inputs.dtype == np.float32 and batch.targets.dtype == np.float32
  mask_BxT = np.asarray(batch.mask)
  assert np.all(mask_BxT[:, t - n:]) and not np.any(mask_BxT[:, :t - n])
  assert not np.any(np.asarray(batch.targets)[:, :t - n])
  for i in range(400):
    ex = task.decode(batch, i)
    assert len(ex["pairs"]) == n * d and len(ex["queries"]) == n == len(ex["targets"])
    chains, steps = _follow(ex, d)
    expected = chains if ic else [c[-1:] for c in chains]
    assert ex["targets"] == expected
    assert steps == [p // n for p in range(n * d)]  # all step-i pairs precede step i+1


def test_shuffles_are_uniform():
  """Chain order within steps and of the queries: all 4! orders, close to uniform."""
  task, batch = _batch(True, 3, 4, 4)
  orders = {"step2": [], "query": []}
  for i in range(400):
    ex = task.decode(batch, i)
    first = [tuple(a) for a, _ in ex["pairs"][:4]]  # step-1 order names the chains
    succ = {tuple(a): tuple(b) for a, b in ex["pairs"]}
    orders["query"].append(tuple(first.index(tuple(q)) for q in ex["queries"]))
    step2 = [tuple(a) for a, _ in ex["pairs"][4:8]]
    orders["step2"].append(tuple(next(c for c in range(4) if succ[first[c]] == a) for a in step2))
  perms = list(itertools.permutations(range(4)))
  for seen in orders.values():
    counts = np.array([seen.count(p) for p in perms])
    assert counts.min() > 0
    assert scipy.stats.chisquare(counts).pvalue > 1e-3


def test_vectors_are_standard_normal():
  task, batch = _batch(True, 5, 4, 4)
  t = task.seq_len(5)
  sym_BxTxK = np.asarray(batch.inputs)[:, :, :4]
  # The distinct symbols: every pair's second vector plus the queries (x_0).
  second = sym_BxTxK[:, 1:t - 4:2].reshape(-1)
  values = np.concatenate([second, sym_BxTxK[:, t - 4:].reshape(-1)])
  assert values.size == 400 * 4 * 6 * 4
  assert abs(values.mean()) < 0.02 and abs(values.var() - 1) < 0.03
  assert scipy.stats.kstest(values, "norm").pvalue > 1e-3


@pytest.mark.parametrize("ic,d,n,k", [(True, 5, 4, 4), (False, 3, 2, 3)])
def test_position_code(ic, d, n, k):
  task, batch = _batch(ic, d, n, k)
  t = task.seq_len(d)
  code_BxTxK = np.asarray(batch.inputs)[:, :, k:]
  assert np.all(code_BxTxK == code_BxTxK[:1])  # the same for every example
  code_TxK = code_BxTxK[0]
  np.testing.assert_array_equal(code_TxK[0:t - n:2], code_TxK[1:t - n:2])  # shared in a pair
  index_T = np.concatenate([np.arange(n * d).repeat(2), n * d + np.arange(n)])
  np.testing.assert_allclose(code_TxK, position_code(n * d + n, k)[index_T], atol=1e-6)
  distinct = np.unique(np.round(code_TxK, 5), axis=0)
  assert len(distinct) == n * d + n  # one code per pair and per query
  np.testing.assert_allclose(position_code(3, 4)[2], [np.sin(2), np.cos(2), np.sin(0.02),
                                                      np.cos(0.02)], rtol=1e-6)


def test_attributes():
  task = Retrieval()
  assert (task.name, task.loss, task.input_vocab, task.input_dim) == ("retrieval", "mse", None, 8)
  assert task.default_length == 5 and task.seq_len(5) == 44 and task.output_dim(5) == 20
  assert Retrieval(implicit_curriculum=False).output_dim(3) == 4
  assert task.options() == {"chains": 4, "dim": 4, "implicit_curriculum": True}


def test_jit_vmap_determinism():
  task = Retrieval(chains=2, dim=2)
  key = jax.random.key(7)
  sample = jax.jit(task.sample, static_argnums=(1, 2))
  first, again, eager = sample(key, 8, 3), sample(key, 8, 3), task.sample(key, 8, 3)
  for a, b, c in zip(jax.tree.leaves(first), jax.tree.leaves(again), jax.tree.leaves(eager)):
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a, c, rtol=1e-6)
  keys = jax.random.split(key, 3)
  stacked = jax.vmap(lambda kk: task.sample(kk, 8, 3))(keys)
  assert stacked.inputs.shape == (3, 8, task.seq_len(3), 4)
  for j in range(3):
    np.testing.assert_allclose(stacked.inputs[j], sample(keys[j], 8, 3).inputs, rtol=1e-6)
    np.testing.assert_allclose(stacked.targets[j], sample(keys[j], 8, 3).targets, rtol=1e-6)
  assert not np.allclose(stacked.inputs[0], stacked.inputs[1])


@pytest.mark.parametrize("options", [
    {"steps": 3}, {"chains": 0}, {"chains": 2.0}, {"chains": True}, {"dim": -1},
    {"dim": "4"}, {"implicit_curriculum": 1}, {"implicit_curriculum": "yes"},
])
def test_bad_options(options):
  with pytest.raises(ValueError) as info:
    Retrieval(**options)
  assert "\n" not in str(info.value) and str(info.value).startswith("retrieval")


@pytest.mark.parametrize("length", [0, -2, 2.0, True, None])
def test_bad_lengths(length):
  with pytest.raises(ValueError) as info:
    Retrieval().sample(jax.random.key(0), 2, length)
  assert "\n" not in str(info.value)
