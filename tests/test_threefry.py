"""depthscale/threefry.py: the unrolled hash gives Threefry-2x32's bits (the Random123 test
vectors and an independent numpy implementation), and a depthscale process lowers random
bits with it where JAX optimizes (JAX's own loop where most optimizations are off, as in
this suite's processes), the same bits either way."""
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.random import threefry2x32_p, threefry_2x32

from depthscale import threefry

M32 = np.uint64(0xFFFFFFFF)
SETTING = "jax_disable_most_optimizations"


def numpy_threefry(k1, k2, x1, x2):
  """Threefry-2x32 with 20 rounds (Salmon et al. 2011), in uint64 masked to 32 bits."""
  k1, k2, x1, x2 = (np.asarray(a, np.uint64) for a in (k1, k2, x1, x2))
  ks = [k1, k2, k1 ^ k2 ^ np.uint64(0x1BD11BDA)]
  x = [(x1 + ks[0]) & M32, (x2 + ks[1]) & M32]
  rot = [[13, 15, 26, 6], [17, 29, 16, 24]]
  for i in range(5):
    for r in rot[i % 2]:
      x[0] = (x[0] + x[1]) & M32
      x[1] = (((x[1] << np.uint64(r)) | (x[1] >> np.uint64(32 - r))) & M32) ^ x[0]
    x[0] = (x[0] + ks[(i + 1) % 3]) & M32
    x[1] = (x[1] + ks[(i + 2) % 3] + np.uint64(i + 1)) & M32
  return x[0].astype(np.uint32), x[1].astype(np.uint32)


# Random123's known answers for threefry2x32_20 (kat_vectors): key, counter -> output
KAT = [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
       ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
       ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]


def u32(v):
  return jnp.asarray(np.array(v, np.uint32))


def test_the_published_vectors():
  for key, count, want in KAT:
    got = jax.jit(threefry_2x32)((u32(key[0]), u32(key[1])), u32(list(count)))
    assert [int(v) for v in np.asarray(got)] == list(want), (key, count, np.asarray(got))
    got = jax.jit(threefry.hash_unrolled)(*map(u32, (*key, *count)))
    assert [int(v) for v in got] == list(want), (key, count, got)
    assert [int(v[()]) for v in numpy_threefry(*key, *count)] == list(want)


def test_many_keys_and_counters_equal_numpy():
  """The unrolled and rolled hashes themselves and the primitive as lowered here (the
  suite compiles with most optimizations off: the rolled one)."""
  rng = np.random.default_rng(0)
  k1, k2, x1, x2 = (rng.integers(0, 2**32, 10_001, dtype=np.uint64).astype(np.uint32)
                    for _ in range(4))
  want = numpy_threefry(k1, k2, x1, x2)
  for fn in (threefry.hash_unrolled, threefry.hash_rolled, lambda *a: threefry2x32_p.bind(*a)):
    got = jax.jit(fn)(*map(u32, (k1, k2, x1, x2)))
    for g, w in zip(got, want):
      np.testing.assert_array_equal(np.asarray(g), w)


def numpy_bits(key, n=30):
  """jax.random.bits(key, (n,)) recomputed in numpy: the hash of counters (0, i), its two
  words xor-ed (JAX's partitionable layout)."""
  k1, k2 = np.asarray(jax.random.key_data(key)).astype(np.uint32)
  x1, x2 = numpy_threefry(k1, k2, np.zeros(n, np.uint32), np.arange(n, dtype=np.uint32))
  return x1 ^ x2


def test_jax_random_bits_equal_numpy():
  """jax.random.bits of a key against numpy_bits: a change in the lowering shows in
  draws."""
  key = jax.random.key(7)
  got = np.asarray(jax.jit(lambda k: jax.random.bits(k, (6, 5)))(key)).ravel()
  np.testing.assert_array_equal(got, numpy_bits(key))


IMPORTS = """
import hashlib, re
import jax
f = lambda k: jax.random.normal(k, (4, 3))
from depthscale.core import ensemble  # any depthscale import registers it
text = jax.jit(f).lower(jax.random.key(0)).as_text()
bits = jax.jit(lambda k: jax.random.bits(k, (30,)))(jax.random.key(7))
ops = hashlib.sha256(re.sub(r"loc\\([^)]*\\)|#loc.*", "", text).encode()).hexdigest()
print("while" in text, ops, *map(int, bits))
"""


def test_a_depthscale_process_lowers_random_bits_without_a_loop():
  """JAX's own CPU lowering is a rolled loop (an stablehlo.while); after importing
  depthscale, draws lower without one, at JAX's default optimization. With most
  optimizations off (the suite's setting) the lowering is JAX's own, op for op. In fresh
  processes: JAX keeps lowerings made."""
  def loop(code, optimize_off):
    env = dict(os.environ, JAX_DISABLE_MOST_OPTIMIZATIONS=optimize_off)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.split()
    assert [int(b) for b in out[2:]] == list(want)  # the same bits either way
    return out[0], out[1]
  want = numpy_bits(jax.random.key(7))
  jax_own = IMPORTS.replace("from depthscale.core import ensemble", "pass")
  assert loop(IMPORTS, "0")[0] == "False"
  assert loop(jax_own, "0")[0] == "True"
  # with most optimizations off, JAX's own lowering op for op (the text but its locations)
  ours = loop(IMPORTS, "1")
  assert ours == loop(jax_own, "1") and ours[0] == "True"


def test_the_lowering_follows_the_setting_at_each_lowering():
  """In one process, the setting switched back and forth (as the suite's `optimized`
  tests do): each new lowering takes the setting of its moment, the same bits either way."""
  want = numpy_bits(jax.random.key(7))
  before = jax.config.read(SETTING)
  try:
    for off in (False, True, False, True):
      jax.config.update(SETTING, off)
      fn = jax.jit(lambda k: jax.random.bits(k, (30,)))  # a new function: lowered anew
      assert ("while" in fn.lower(jax.random.key(7)).as_text()) == off
      np.testing.assert_array_equal(np.asarray(fn(jax.random.key(7))), want)
  finally:
    jax.config.update(SETTING, before)
