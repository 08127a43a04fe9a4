"""Which x86 instruction set XLA's CPU backend generates under the current XLA_FLAGS.

  python tools/isa_seen.py        prints one of SSE4_2, AVX, AVX2, AVX512

XLA accepts an unknown --xla_cpu_max_isa value without a word, so a cap is checked by what
it does: a small fused elementwise program (a * b + c over float32) is compiled with its
object code dumped, and the widest vector registers and fused multiply-adds in that code
name the level (zmm: AVX512; vfmadd: AVX2, which XLA pairs with FMA; ymm: AVX; else
SSE4_2). Needs objdump (binutils). tools/isa_matrix.sh calls it before each cap's tests.
"""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile


def seen() -> str:
  with tempfile.TemporaryDirectory(prefix="isa_seen_") as dump:
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = f"{flags} --xla_dump_to={dump}".strip()
    import jax
    import jax.numpy as jnp
    x = jnp.arange(4096, dtype=jnp.float32)
    jax.block_until_ready(jax.jit(lambda a, b, c: a * b + c)(x, x + 1, x + 2))
    objects = glob.glob(os.path.join(dump, "*fusion*.o"))
    if not objects:
      sys.exit(f"isa_seen: XLA dumped no fusion object code into {dump}")
    code = "".join(subprocess.run(["objdump", "-d", o], capture_output=True, text=True,
                                  check=True).stdout for o in objects)
  if "%zmm" in code:
    return "AVX512"
  if "vfmadd" in code:
    return "AVX2"
  if "%ymm" in code:
    return "AVX"
  return "SSE4_2"


if __name__ == "__main__":
  print(seen())
