"""Helpers on graphs as dense adjacency matrices, inside jit: a uniform pick among marked
vertices, shortest-path lengths, and the reachability closure (tasks/reachability.py)."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp


def pick(u_N: jax.Array, mask_N: jax.Array) -> jax.Array:
  """Index drawn uniformly (by uniforms u_N) among the True entries of `mask_N` (0 if none)."""
  return jnp.argmax(jnp.where(mask_N, u_N, -1.0)).astype(jnp.int32)


def hops(adj_NxN: jax.Array, n: int) -> jax.Array:
  """int32 [n, n]: the shortest path's length from each vertex to each (1 for an edge; n
  where unreachable; a vertex reaches itself only through a cycle back to it)."""
  seen_NxN = adj_NxN > 0
  hops_NxN = jnp.where(seen_NxN, 1, n)
  for k in range(2, n):
    seen_NxN = seen_NxN | ((seen_NxN.astype(jnp.float32) @ adj_NxN) > 0)
    hops_NxN = jnp.where(seen_NxN & (hops_NxN == n), k, hops_NxN)
  return hops_NxN.astype(jnp.int32)


def reach(adj_NxN: jax.Array, n: int) -> jax.Array:
  """Transitive-reflexive closure by repeated squaring: ceil(log2(n - 1)) float matmuls."""
  r_NxN = jnp.maximum(adj_NxN, jnp.eye(n, dtype=jnp.float32))
  for _ in range(max(1, math.ceil(math.log2(max(n - 1, 2))))):
    r_NxN = (r_NxN @ r_NxN > 0).astype(jnp.float32)
  return r_NxN > 0
