"""Reachability sampler: labels against an independent BFS, balance, structure, jit/vmap."""
import collections

import jax
import numpy as np
import pytest
import scipy.stats

from depthscale.tasks.reachability import Reachability


# Each setting costs one XLA compile (~0.5 s cycles, ~1.7 s random on 2 CPU cores).
SETTINGS = [("random", d, n) for d in (False, True) for n in (6, 16, 32)] + [
    ("cycles", d, n) for d in (False, True) for n in (6, 16, 32)]
_CACHE = {}


def _batch(family, directed, n):
  """4000 examples of one setting, sampled once per test session."""
  key = (family, directed, n)
  if key not in _CACHE:
    task = Reachability(family=family, directed=directed)
    _CACHE[key] = task, jax.device_get(task.sample(jax.random.key(n), 4000, n))
  return _CACHE[key]


def _distance(edges, directed, s, t):
  """The shortest path's length from s to t by BFS (None: unreachable)."""
  adj = collections.defaultdict(list)
  for u, v in edges:
    adj[u].append(v)
    if not directed:
      adj[v].append(u)
  hops, queue = {s: 0}, collections.deque([s])
  while queue:
    u = queue.popleft()
    for v in adj[u]:
      if v not in hops:
        hops[v] = hops[u] + 1
        queue.append(v)
  return hops.get(t)


def _bfs(edges, directed, s, t):
  return _distance(edges, directed, s, t) is not None


def _components(vertices, edges):
  parent = {v: v for v in vertices}

  def find(v):
    while parent[v] != v:
      parent[v] = parent[parent[v]]
      v = parent[v]
    return v
  for u, v in edges:
    parent[find(u)] = find(v)
  return collections.Counter(find(v) for v in vertices)


@pytest.mark.parametrize("family,directed,n", SETTINGS)
def test_labels_match_bfs_and_are_balanced(family, directed, n):
  task, batch = _batch(family, directed, n)
  m, vocab = task.num_edges(n), task.options()["vocab"]
  x_BxT, y_BxT, mask_BxT = np.asarray(batch.inputs), np.asarray(batch.targets), batch.mask
  assert x_BxT.shape == (4000, task.seq_len(n)) == (4000, 3 * m + 3)
  assert x_BxT.dtype == np.int32 and y_BxT.dtype == np.int32
  assert np.all(x_BxT[:, 2:-3:3] == vocab) and np.all(x_BxT[:, -3] == vocab + 1)
  assert x_BxT.min() >= 0 and x_BxT.max() < task.input_vocab
  assert np.all(mask_BxT[:, -1]) and not np.any(mask_BxT[:, :-1]) and not np.any(y_BxT[:, :-1])
  rate = y_BxT[:, -1].mean()
  assert 0.45 <= rate <= 0.55, rate
  for i in range(1000):  # BFS on the first 1000; balance above is over all 4000
    ex = task.decode(batch, i)
    edges, s, t = ex["edges"], ex["source"], ex["target"]
    assert ex["directed"] == directed and len(edges) == m and s != t
    assert ex["reachable"] == _bfs(edges, directed, s, t)
    vertices = {u for e in edges for u in e}
    assert len(vertices) <= n and all(u != v for u, v in edges)
    keys = [(u, v) if directed else frozenset((u, v)) for u, v in edges]
    assert len(set(keys)) == m  # no repeated edges
    if family == "random":  # s has an edge out and t an edge in: no look-up shortcut
      assert any(u == s for u, _ in edges) or (not directed and any(v == s for _, v in edges))
      assert any(v == t for _, v in edges) or (not directed and any(u == t for u, _ in edges))


@pytest.mark.parametrize("family,directed,n", [("random", False, 8), ("random", True, 12),
                                               ("cycles", False, 8)])
def test_vertex_queries_label_every_vertex_as_bfs_does(family, directed, n):
  """query='vertices': QUERY s, then each of the graph's n vertices once, each labelled
  reachable from s by an independent BFS; only those n positions are scored."""
  task = Reachability(family=family, directed=directed, query="vertices")
  batch = jax.device_get(task.sample(jax.random.key(5), 500, n))
  m, vocab = task.num_edges(n), task.options()["vocab"]
  x_BxT, y_BxT, mask_BxT = (np.asarray(a) for a in (batch.inputs, batch.targets, batch.mask))
  assert x_BxT.shape == (500, task.seq_len(n)) == (500, 3 * m + 2 + n)
  assert np.all(x_BxT[:, 3 * m] == vocab + 1) and np.all(x_BxT[:, 2:3 * m:3] == vocab)
  assert np.all(mask_BxT[:, -n:]) and not np.any(mask_BxT[:, :-n]) and not y_BxT[:, :-n].any()
  for i in range(500):
    ex = task.decode(batch, i)
    edges, s = ex["edges"], ex["source"]
    assert len(edges) == m and len(set(ex["vertices"])) == n
    assert {u for e in edges for u in e} <= set(ex["vertices"]) and s in ex["vertices"]
    assert ex["reachable"] == [_distance(edges, directed, s, v) is not None
                               for v in ex["vertices"]]
  rate = y_BxT[:, -n:].mean()
  assert 0.2 < rate < 0.9, rate  # neither answer a constant


def test_distance_balance_spreads_the_yes_pairs_over_distances():
  """balance='distance' draws a 'yes' pair's distance first: far pairs are no longer rare
  (label balance: measured 40% of them at distance 1, mean 2.1; distance balance: 24%,
  mean 2.7); labels still match BFS and stay balanced."""
  got = {}
  for balance in ("label", "distance"):
    task = Reachability(balance=balance)
    batch = jax.device_get(task.sample(jax.random.key(1), 2000, 12))
    hops = []
    for i in range(2000):
      ex = task.decode(batch, i)
      d = _distance(ex["edges"], False, ex["source"], ex["target"])
      assert ex["reachable"] == (d is not None)
      hops += [d] if d is not None else []
    assert 0.45 < len(hops) / 2000 < 0.55
    got[balance] = np.asarray(hops)
  assert (got["distance"] == 1).mean() < 0.3 and (got["label"] == 1).mean() > 0.33
  assert got["distance"].mean() > got["label"].mean() + 0.3


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("n", [6, 16, 32])
def test_cycles_structure(directed, n):
  task, batch = _batch("cycles", directed, n)
  ones = 0
  for i in range(1000):
    ex = task.decode(batch, i)
    edges = ex["edges"]
    vertices = {u for e in edges for u in e}
    assert len(vertices) == n
    out_deg = collections.Counter(u for u, _ in edges)
    in_deg = collections.Counter(v for _, v in edges)
    if directed:
      assert set(out_deg.values()) == {1} and set(in_deg.values()) == {1}
    else:
      assert set((out_deg + in_deg).values()) == {2}
    sizes = sorted(_components(vertices, edges).values())
    assert sizes in ([n], [n // 2, n // 2])
    assert ex["reachable"] == (sizes == [n])
    ones += sizes == [n]
  assert 430 <= ones <= 570


@pytest.mark.parametrize("family,directed,n", [("random", False, 16), ("cycles", True, 32)])
def test_labels_uniform_over_vocab(family, directed, n):
  _, batch = _batch(family, directed, n)
  x_BxT = np.asarray(batch.inputs)
  for column in (x_BxT[:, -2], x_BxT[:, -1], x_BxT[:, 0]):  # source, target, first vertex
    counts = np.bincount(column, minlength=128)
    assert len(counts) == 128
    assert scipy.stats.chisquare(counts).pvalue > 1e-3


def test_attributes():
  task = Reachability()
  assert (task.name, task.loss, task.input_vocab, task.input_dim) == ("reachability", "xent",
                                                                      130, None)
  assert task.default_length == 16 and task.output_dim(16) == 2
  assert task.num_edges(16) == 11 and Reachability(directed=True).num_edges(16) == 22
  assert task.options() == {"family": "random", "directed": False, "vocab": 128,
                            "edges_per_vertex": 0.7, "query": "pair", "balance": "label"}
  assert Reachability(family="cycles").seq_len(16) == 51
  assert Reachability(edges_per_vertex=2).num_edges(10) == 20


@pytest.mark.parametrize("family", ["random", "cycles"])
def test_jit_vmap_determinism(family):
  task = Reachability(family=family, directed=True)
  key = jax.random.key(11)
  sample = jax.jit(task.sample, static_argnums=(1, 2))  # eager sample() is covered above
  first, again = sample(key, 8, 6), sample(key, 8, 6)
  for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(again)):
    np.testing.assert_array_equal(a, b)
  keys = jax.random.split(key, 3)
  stacked = jax.vmap(lambda k: task.sample(k, 8, 6))(keys)
  assert stacked.inputs.shape == (3, 8, task.seq_len(6))
  for j in range(3):
    single = sample(keys[j], 8, 6)
    np.testing.assert_array_equal(stacked.inputs[j], single.inputs)
    np.testing.assert_array_equal(stacked.targets[j], single.targets)
  assert not np.array_equal(stacked.inputs[0], stacked.inputs[1])


@pytest.mark.parametrize("options", [
    {"colour": 1}, {"family": "tree"}, {"directed": 1}, {"vocab": 3}, {"vocab": True},
    {"vocab": 16.0}, {"edges_per_vertex": -1.0}, {"edges_per_vertex": "many"},
    {"edges_per_vertex": float("nan")}, {"family": "cycles", "edges_per_vertex": 1.0},
    {"query": "all"}, {"balance": "hops"}, {"balance": "distance", "family": "cycles"},
    {"balance": "distance", "query": "vertices"},
])
def test_bad_options(options):
  with pytest.raises(ValueError) as info:
    Reachability(**options)
  assert "\n" not in str(info.value) and str(info.value).startswith("reachability")


@pytest.mark.parametrize("options,length", [
    ({"family": "cycles"}, 7), ({"family": "cycles"}, 2), ({"vocab": 8}, 9), ({}, 5),
    ({"family": "cycles", "vocab": 8}, 10), ({}, 0), ({}, 6.0), ({}, True),
    ({"edges_per_vertex": 10.0}, 6),
])
def test_bad_lengths(options, length):
  with pytest.raises(ValueError) as info:
    Reachability(**options).sample(jax.random.key(0), 2, length)
  assert "\n" not in str(info.value) and str(info.value).startswith("reachability")
