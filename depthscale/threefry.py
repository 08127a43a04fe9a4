"""Threefry-2x32 (JAX's default random bits) lowered unrolled on CPU, as elsewhere.

JAX lowers the hash as a rolled loop of 5 iterations on CPU and unrolled (an out-of-line
function) on every other platform. At XLA's full optimization the CPU compiler takes far
longer over the rolled loops: every model init (one draw per parameter) and every
in-program sampler pays it (BUILD_NOTES, Test suite: the recall test's init compiled in
3 s instead of 10). With most optimizations off a rolled loop compiles faster, and is
kept (hash_rolled: JAX's loop, in our own code). The choice is made at each lowering, by
the optimization setting then: a function lowered after a process switches it (the test
suite's `optimized` tests) lowers as in a process started with it, while what JAX
lowered or compiled before stays as it was. The hash is integer arithmetic, so every
lowering gives the same bits (tests/test_threefry.py checks them against a numpy
Threefry and the published test vectors). Registered on import, by
depthscale.tasks, depthscale.model and depthscale.core (every package that draws), before
any program is lowered: JAX keeps a function's lowering once made, so a registration
after a first draw would not reach it.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.random import threefry2x32_p
from jax.interpreters import mlir

ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))  # the rounds' rotations, alternating
PARITY = 0x1BD11BDA  # the key schedule's constant


def _rotate_left(x, d):
  return lax.shift_left(x, np.uint32(d)) | lax.shift_right_logical(x, np.uint32(32 - d))


def hash_unrolled(key1, key2, x1, x2):
  """Threefry-2x32, 20 rounds: 5 groups of 4, the key injected after each group."""
  ks = (key1, key2, key1 ^ key2 ^ np.uint32(PARITY))
  x1, x2 = x1 + ks[0], x2 + ks[1]
  for i in range(5):
    for r in ROTATIONS[i % 2]:
      x1 = x1 + x2
      x2 = _rotate_left(x2, r) ^ x1
    x1 = x1 + ks[(i + 1) % 3]
    x2 = x2 + ks[(i + 2) % 3] + np.uint32(i + 1)
  return x1, x2


def hash_rolled(key1, key2, x1, x2):
  """The same hash as JAX's own CPU lowering writes it, op for op: a loop of 5
  iterations carrying the key schedule and the rotations, each rotated once a group."""
  def group(i, state):
    (x1, x2), ks, rotations = state
    for r in rotations[0]:
      x1 = x1 + x2
      x2 = x1 ^ (lax.shift_left(x2, r) | lax.shift_right_logical(x2, np.uint32(32) - r))
    x = [x1 + ks[0], x2 + ks[1] + jnp.asarray(i + 1, dtype=np.uint32)]
    return x, ks[1:] + ks[:1], rotations[1:] + rotations[:1]
  ks = [key1, key2, key1 ^ key2 ^ np.uint32(PARITY)]
  rotations = [np.array(r, dtype=np.uint32) for r in ROTATIONS]
  x, _, _ = lax.fori_loop(0, 5, group, ([x1 + ks[0], x2 + ks[1]], ks[1:] + ks[:1], rotations))
  return tuple(x)


def register() -> None:
  """Lower threefry2x32 on CPU by the optimization setting at each lowering: at XLA's
  optimization unrolled and out of line (a call), as on other platforms; with most
  optimizations off (`jax_disable_most_optimizations`, the test suite's setting) inline
  and rolled, as JAX lowers it on CPU, where it compiles faster (BUILD_NOTES, Test
  suite)."""
  out_of_line = jax.jit(hash_unrolled)
  unrolled, rolled = (mlir.lower_fun(lambda *a, f=f: f(*(jnp.asarray(x) for x in a)),
                                      multiple_results=True)
                       for f in (out_of_line, hash_rolled))

  def lowering(ctx, *args):
    off = jax.config.read("jax_disable_most_optimizations")
    return (rolled if off else unrolled)(ctx, *args)
  mlir.register_lowering(threefry2x32_p, lowering, platform="cpu")


register()
