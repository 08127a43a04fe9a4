"""Graph reachability (Merrill & Sabharwal, Theorem 2) and the talk's 1-vs-2-cycle family.

A sampler of edge lists with a query "is t reachable from s?"; labels are decided in-jit.
Must not import depthscale.model, depthscale.core or anything above tasks.
"""
from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from depthscale.tasks import base, graphs
from depthscale.errors import UserError

# Default edges per vertex for family="random": m(n) = round(e * n). These sit just above the
# giant-component threshold, where a uniform (s, t) pair with s on some edge out and t on some
# edge in is reachable about half the time at n = 16..64 (measured: 0.58/0.48/0.46 undirected,
# 0.62/0.53/0.48 directed at n = 16/32/64), so forcing y ~ Bernoulli(1/2) barely tilts the
# graph distribution. At the connectivity threshold almost every "no" would be an isolated t.
DEFAULT_EDGES_PER_VERTEX = {False: 0.7, True: 1.4}
MIN_RANDOM_LENGTH = 6
MAX_ATTEMPTS = 64  # graphs tried per example before a "no" label gives up and turns "yes"

_VALID = {
    "family": "'random' (default) or 'cycles'",
    "directed": "bool, default False; for 'cycles' the cycles are directed",
    "vocab": "int >= 4, default 128; vertex labels are drawn injectively from [0, vocab)",
    "edges_per_vertex": "float > 0, only for family='random'; default 0.7 undirected, 1.4 directed",
    "query": "'pair' (default: is t reachable from s, one decision per graph) or 'vertices' "
             "(every vertex after s, each labelled reachable from s or not)",
    "balance": "'label' (default: y ~ Bernoulli(1/2)) or 'distance' (family='random', "
               "query='pair': a reachable pair at a distance drawn uniformly among those "
               "its graph has)",
}


class Reachability(base.Task):
  """Is t reachable from s? Edges "u v EDGE" in random order, then "QUERY s t".

  Tokens: [0, vocab) vertex labels (a random injective labelling of the n vertices),
  EDGE = vocab closes each edge, QUERY = vocab + 1; input_vocab = vocab + 2. T = 3m + 3.
  Target: class 1 (reachable) or 0 at the last position only (the token t); mask likewise.

  family="random": m(n) = round(edges_per_vertex * n) distinct edges without self-loops,
  uniform among all such graphs; y ~ Bernoulli(1/2) first, then s uniform among vertices
  with an outgoing edge that have some t != s, t with an incoming edge, reach(s, t) == y,
  and t uniform among those. (Undirected: "outgoing"/"incoming" = any incident edge.) So
  neither answer can be read off a vertex missing from the edge list. A graph without such
  a pair is redrawn, up to MAX_ATTEMPTS times (then the label becomes 1; never seen at the
  defaults). Undirected edges are written in a random orientation.
  family="cycles": one n-cycle or two n/2-cycles with prob 1/2 each (n even >= 4), m = n;
  one cycle: t uniform != s (reachable); two cycles: t uniform in the other cycle (not).

  query="vertices": after the edges, "QUERY s" and then every vertex once, in random
  order, each with its own target (1: reachable from s, s itself included), so a graph
  gives n labels instead of one (T = 3m + 2 + n); s is drawn as for a "yes" pair.
  balance="distance" (random family, pair query): a "yes" pair is drawn by first drawing
  a distance uniformly among the shortest-path distances its graph's allowed pairs have,
  then (s, t) among the pairs at it; uniform pairs make far targets rare (Saparov et al.
  2024, "Transformers Struggle to Learn to Search", found this balance decisive).
  """

  def __init__(self, **options):
    base.check_options("reachability", options, _VALID)
    family = options.get("family", "random")
    directed = options.get("directed", False)
    vocab = options.get("vocab", 128)
    epv = options.get("edges_per_vertex", None)
    if family not in ("random", "cycles"):
      raise UserError(f"reachability: family must be 'random' or 'cycles', got {family!r}")
    if not isinstance(directed, bool):
      raise UserError(f"reachability: directed must be a bool, got {directed!r}")
    if not isinstance(vocab, int) or isinstance(vocab, bool) or vocab < 4:
      raise UserError(f"reachability: vocab must be an int >= 4, got {vocab!r}")
    if family == "cycles" and epv is not None:
      raise UserError("reachability: edges_per_vertex is only valid with family='random' "
                       "(cycles always have n edges)")
    query, balance = options.get("query", "pair"), options.get("balance", "label")
    if query not in ("pair", "vertices"):
      raise UserError(f"reachability: query must be 'pair' or 'vertices', got {query!r}")
    if balance not in ("label", "distance"):
      raise UserError(f"reachability: balance must be 'label' or 'distance', got {balance!r}")
    if balance == "distance" and (family != "random" or query != "pair"):
      raise UserError("reachability: balance='distance' needs family='random' and "
                      "query='pair'")
    if family == "random":
      epv = DEFAULT_EDGES_PER_VERTEX[directed] if epv is None else epv
      if (not isinstance(epv, (int, float)) or isinstance(epv, bool) or not math.isfinite(epv)
          or epv <= 0):
        raise UserError(f"reachability: edges_per_vertex must be a float > 0, got {epv!r}")
      epv = float(epv)
    self.scaled_by = "size"  # one decision per example: n* would be 0 or 1
    self._options = {"family": family, "directed": directed, "vocab": vocab,
                     "edges_per_vertex": epv, "query": query, "balance": balance}
    self.name = "reachability"
    self.loss = "xent"
    self.input_vocab = vocab + 2
    self.input_dim = None
    self.default_length = 16
    self.edge_token = vocab
    self.query_token = vocab + 1
    self._sample_jit = jax.jit(self._sample, static_argnums=(1, 2))  # eager calls compile once

  def num_edges(self, length: int) -> int:
    """m(n): n for cycles, round(edges_per_vertex * n) (at least 1) for random graphs."""
    if self._options["family"] == "cycles":
      return length
    return max(1, int(self._options["edges_per_vertex"] * length + 0.5))

  def check_length(self, length: int) -> None:
    super().check_length(length)
    opts = self._options
    if length > opts["vocab"]:
      raise UserError(f"reachability: length (vertices) must be <= vocab={opts['vocab']}, "
                       f"got {length}; raise the vocab option")
    if opts["family"] == "cycles":
      if length < 4 or length % 2:
        raise UserError(f"reachability: family='cycles' needs an even length >= 4, got {length}")
      return
    if length < MIN_RANDOM_LENGTH:
      raise UserError(f"reachability: family='random' needs length >= {MIN_RANDOM_LENGTH}, "
                       f"got {length}")
    pairs = length * (length - 1) // (1 if opts["directed"] else 2)
    if self.num_edges(length) > pairs:
      raise UserError(f"reachability: edges_per_vertex={opts['edges_per_vertex']} asks for "
                       f"{self.num_edges(length)} edges but n={length} has only {pairs} pairs")

  def output_dim(self, length: int) -> int:
    return 2

  def seq_len(self, length: int) -> int:
    if self._options["query"] == "vertices":
      return 3 * self.num_edges(length) + 2 + length
    return 3 * self.num_edges(length) + 3

  def uniforms(self, n: int) -> int:
    """How many uniforms one attempt of the random family draws."""
    pairs = n * (n - 1) // (1 if self._options["directed"] else 2)
    return pairs + self.num_edges(n) + (3 if self._options["balance"] == "distance" else 2) * n

  def _attempt(self, u_U: jax.Array, n: int, y: jax.Array):
    """One graph from uniforms u_U: (edges_Mx2, s, t, ok, reach row of s) with reach(s, t)
    == y if ok, else (s, t) for label 1 (the fallback). m distinct edges, uniform among
    such graphs."""
    directed = self._options["directed"]
    m = self.num_edges(n)
    u_P, v_P = np.nonzero(~np.eye(n, dtype=bool) if directed else np.triu(np.ones((n, n), bool), 1))
    p = len(u_P)
    pairs_Px2 = jnp.asarray(np.stack([u_P, v_P], 1), jnp.int32)
    _, idx_M = jax.lax.top_k(u_U[:p], m)  # a uniform m-subset, in random order
    edges_Mx2 = pairs_Px2[idx_M]
    if not directed:
      edges_Mx2 = jnp.where(u_U[p:p + m, None] < 0.5, edges_Mx2[:, ::-1], edges_Mx2)
    adj_NxN = jnp.zeros((n, n), jnp.float32).at[edges_Mx2[:, 0], edges_Mx2[:, 1]].set(1.0)
    if not directed:
      adj_NxN = jnp.maximum(adj_NxN, adj_NxN.T)
    reach_NxN = graphs.reach(adj_NxN, n)
    has_out_N, has_in_N = adj_NxN.max(1) > 0, adj_NxN.max(0) > 0
    allowed_NxN = has_out_N[:, None] & has_in_N[None, :] & ~jnp.eye(n, dtype=bool)
    u_RxN = u_U[p + m:].reshape(-1, n)  # rows: s, t (and the distance)
    valid_NxN = allowed_NxN & (reach_NxN == y)
    ok = valid_NxN.any()
    valid_NxN = jnp.where(ok, valid_NxN, allowed_NxN & reach_NxN)  # label 1 always exists
    if self._options["balance"] == "distance":  # for a "yes": a distance first
      hops_NxN = graphs.hops(adj_NxN, n)
      at_N = jnp.arange(n)
      present_N = (valid_NxN[None] & (hops_NxN[None] == at_N[:, None, None])).any((1, 2))
      d = graphs.pick(u_RxN[2], present_N)
      valid_NxN = jnp.where(y, valid_NxN & (hops_NxN == d), valid_NxN)
    s = graphs.pick(u_RxN[0], valid_NxN.any(1))
    targets_N = valid_NxN[s]
    return edges_Mx2, s, graphs.pick(u_RxN[1], targets_N), ok, reach_NxN[s]

  def _random(self, keys_A: jax.Array, y_B: jax.Array, n: int):
    """Batched rejection sampling: redraw the graphs of examples whose label y is impossible.
    keys_A: one key per attempt. Returns (edges_BxMx2, s_B, t_B, reachable_B, the reach
    row of each s_B: [B, n])."""
    batch_size, m, u = y_B.shape[0], self.num_edges(n), self.uniforms(n)
    attempt = jax.vmap(lambda u_U, y: self._attempt(u_U, n, y))

    def cond(carry):
      return (carry[0] < MAX_ATTEMPTS) & ~carry[1].all()

    def body(carry):
      i, done_B, edges_BxMx2, s_B, t_B, label_B, row_BxN = carry
      u_BxU = jax.random.uniform(keys_A[i], (batch_size * u,))
      edges_new, s_new, t_new, ok_B, row_new = attempt(u_BxU.reshape(batch_size, u), y_B)
      take_B = ~done_B & (ok_B | (i == MAX_ATTEMPTS - 1))
      return (i + 1, done_B | take_B, jnp.where(take_B[:, None, None], edges_new, edges_BxMx2),
              jnp.where(take_B, s_new, s_B), jnp.where(take_B, t_new, t_B),
              jnp.where(take_B, y_B | ~ok_B, label_B),
              jnp.where(take_B[:, None], row_new, row_BxN))

    zero_B = jnp.zeros((batch_size,), jnp.int32)
    init = (jnp.int32(0), jnp.zeros((batch_size,), bool), jnp.zeros((batch_size, m, 2), jnp.int32),
            zero_B, zero_B, y_B, jnp.zeros((batch_size, n), bool))
    return jax.lax.while_loop(cond, body, init)[2:]

  def _cycles(self, u_BxU: jax.Array, n: int):
    """(edges_BxMx2, s_B, t_B, reachable_B, s_B's reach row) for one n-cycle or two
    n/2-cycles; U = 2n + 3."""
    h = n // 2
    i_N = np.arange(n)
    one_Nx2 = jnp.asarray(np.stack([i_N, (i_N + 1) % n], 1), jnp.int32)
    two_Nx2 = jnp.asarray(np.stack([i_N, np.where(i_N < h, (i_N + 1) % h,
                                                  h + (i_N - h + 1) % h)], 1), jnp.int32)
    one_B = u_BxU[:, 0] < 0.5
    edges_BxMx2 = jnp.where(one_B[:, None, None], one_Nx2, two_Nx2)
    order_BxM = jnp.argsort(u_BxU[:, 1:n + 1], axis=1)
    edges_BxMx2 = jnp.take_along_axis(edges_BxMx2, order_BxM[:, :, None], axis=1)
    if not self._options["directed"]:
      flip_BxM = u_BxU[:, n + 1:2 * n + 1] < 0.5
      edges_BxMx2 = jnp.where(flip_BxM[:, :, None], edges_BxMx2[:, :, ::-1], edges_BxMx2)
    s_B = jnp.minimum((u_BxU[:, -2] * n).astype(jnp.int32), n - 1)
    r_B = u_BxU[:, -1]
    t_one_B = (s_B + 1 + jnp.minimum((r_B * (n - 1)).astype(jnp.int32), n - 2)) % n
    t_two_B = jnp.where(s_B < h, h, 0) + jnp.minimum((r_B * h).astype(jnp.int32), h - 1)
    row_BxN = one_B[:, None] | ((i_N[None, :] < h) == (s_B[:, None] < h))  # s's cycle
    return edges_BxMx2, s_B, jnp.where(one_B, t_one_B, t_two_B), one_B, row_BxN

  def _sample(self, key: jax.Array, batch_size: int, length: int) -> base.Batch:
    n, vocab = length, self._options["vocab"]
    # Few jax.random calls, each one flat draw: XLA:CPU compiles every threefry call slowly.
    if self._options["family"] == "cycles":
      u = vocab + 2 * n + 3
      u_BxU = jax.random.uniform(key, (batch_size * u,)).reshape(batch_size, u)
      edges_BxMx2, s_B, t_B, reach_B, row_BxN = self._cycles(u_BxU[:, vocab:], n)
    else:
      keys_A = jax.random.split(key, MAX_ATTEMPTS + 1)
      u_BxU = jax.random.uniform(keys_A[0], (batch_size * (vocab + 1),)).reshape(batch_size, -1)
      y_B = u_BxU[:, vocab] < 0.5
      if self._options["query"] == "vertices":  # s as for a "yes": it reaches some t
        y_B = jnp.ones_like(y_B)
      edges_BxMx2, s_B, t_B, reach_B, row_BxN = self._random(keys_A[1:], y_B, n)
    if self._options["query"] == "vertices":
      return self._vertices(key, u_BxU[:, :vocab], edges_BxMx2, s_B, row_BxN, n)
    label_BxN, edge_BxE, s_lab_B = self._labelled(u_BxU[:, :vocab], edges_BxMx2, s_B, n)
    t_lab_B = jnp.take_along_axis(label_BxN, t_B[:, None], axis=1)[:, 0]
    query_Bx3 = jnp.stack([jnp.full((batch_size,), self.query_token, jnp.int32), s_lab_B,
                           t_lab_B], axis=1)
    x_BxT = jnp.concatenate([edge_BxE, query_Bx3], axis=1)
    t = self.seq_len(length)
    last_T = jnp.arange(t) == t - 1
    targets_BxT = jnp.where(last_T[None, :], reach_B.astype(jnp.int32)[:, None], 0)
    mask_BxT = jnp.broadcast_to(last_T[None, :], (batch_size, t))
    return base.Batch(inputs=x_BxT, targets=targets_BxT.astype(jnp.int32), mask=mask_BxT)

  def _labelled(self, u_BxV, edges_BxMx2, s_B, n: int):
    """A random injective labelling of the n vertices (from the uniforms u_BxV), the edge
    list as tokens (a, b, EDGE per edge: [B, 3m]) and s's label."""
    batch_size, m = edges_BxMx2.shape[:2]
    label_BxN = jax.lax.top_k(u_BxV, n)[1].astype(jnp.int32)
    tok_BxMx2 = jnp.take_along_axis(label_BxN, edges_BxMx2.reshape(batch_size, 2 * m), axis=1)
    sep_BxMx1 = jnp.full((batch_size, m, 1), self.edge_token, jnp.int32)
    edge_BxE = jnp.concatenate([tok_BxMx2.reshape(batch_size, m, 2), sep_BxMx1], 2)
    s_lab_B = jnp.take_along_axis(label_BxN, s_B[:, None], axis=1)[:, 0]
    return label_BxN, edge_BxE.reshape(batch_size, 3 * m), s_lab_B

  def _vertices(self, key, u_BxV, edges_BxMx2, s_B, row_BxN, n: int) -> base.Batch:
    """query="vertices": edges, QUERY s, then the n vertices in random order, each labelled
    reachable from s (1) or not."""
    batch_size, m = s_B.shape[0], edges_BxMx2.shape[1]
    label_BxN, edge_BxE, s_lab_B = self._labelled(u_BxV, edges_BxMx2, s_B, n)
    order_BxN = jnp.argsort(jax.random.uniform(jax.random.fold_in(key, 1), (batch_size, n)), 1)
    asked_BxN = jnp.take_along_axis(label_BxN, order_BxN, axis=1)
    answer_BxN = jnp.take_along_axis(row_BxN, order_BxN, axis=1).astype(jnp.int32)
    head_Bx2 = jnp.stack([jnp.full((batch_size,), self.query_token, jnp.int32), s_lab_B], 1)
    x_BxT = jnp.concatenate([edge_BxE, head_Bx2, asked_BxN], 1)
    zeros_BxH = jnp.zeros((batch_size, 3 * m + 2), jnp.int32)
    targets_BxT = jnp.concatenate([zeros_BxH, answer_BxN], 1)
    mask_BxT = jnp.concatenate([zeros_BxH.astype(bool), jnp.ones((batch_size, n), bool)], 1)
    return base.Batch(inputs=x_BxT, targets=targets_BxT, mask=mask_BxT)

  def sample(self, key: jax.Array, batch_size: int, length: int) -> base.Batch:
    self.check_length(length)
    return self._sample_jit(key, batch_size, length)

  def decode(self, batch: base.Batch, i: int) -> dict[str, Any]:
    x_T = np.asarray(batch.inputs[i]).tolist()
    if self._options["query"] == "vertices":
      q = x_T.index(self.query_token)
      edges = [(x_T[j], x_T[j + 1]) for j in range(0, q, 3)]
      return {"edges": edges, "directed": self._options["directed"], "source": x_T[q + 1],
              "vertices": x_T[q + 2:],
              "reachable": [bool(v) for v in np.asarray(batch.targets[i])[q + 2:]]}
    edges = [(x_T[j], x_T[j + 1]) for j in range(0, len(x_T) - 3, 3)]
    return {"edges": edges, "directed": self._options["directed"], "source": x_T[-2],
            "target": x_T[-1], "reachable": bool(np.asarray(batch.targets[i])[-1])}
