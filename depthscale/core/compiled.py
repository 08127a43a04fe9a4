"""Compiled programs kept in memory for the life of a process, by what they are compiled
from: the lowered program's text and the devices it runs on.

`program.build` makes a new function for every group, so JAX's own jit cache never sees
the same program twice; this does. A program built again in one process (the group that
`run` trains after the probe timed it, a queue rebuilt to a shape it had before, a group
resumed in the same process, a test's repeated group) compiles once. The text holds the
shapes, dtypes, shardings and every lowering setting (matmul precision included), so two
programs with equal text and devices compile to the same executable; JAX's
`jax_disable_most_optimizations`, a compile setting outside the text, is part of the key
too. The last KEEP are kept (executables only: no buffers).
"""
from __future__ import annotations

import collections
import dataclasses
import hashlib
import time

import jax

KEEP = 16


@dataclasses.dataclass(frozen=True)
class Compiled:
  """An executable, the fingerprint of its lowered text, the seconds its compile took
  (when first compiled) and the seconds this request spent (about 0 when kept)."""
  executable: object
  fingerprint: str
  compile_cost_s: float
  spent_s: float


_KEPT: collections.OrderedDict = collections.OrderedDict()


def bounded(jitted, keep: int = 32):
  """`jitted`, its executables dropped once it holds `keep` of them: each holds memory
  maps, and a worker compiling one per group would otherwise grow past the kernel's limit
  (BUILD_NOTES, Decisions: memory maps)."""
  if jitted._cache_size() >= keep:
    jitted.clear_cache()
  return jitted


def compile_lowered(lowered, devices) -> Compiled:
  """`lowered.compile()`, or the executable kept from an equal program on the same
  devices."""
  t0 = time.perf_counter()
  digest = hashlib.sha256(lowered.as_text().encode()).hexdigest()
  key = (digest, tuple((d.platform, d.id) for d in devices),
         jax.config.values.get("jax_disable_most_optimizations"))
  if key in _KEPT:
    _KEPT.move_to_end(key)
    executable, cost = _KEPT[key]
  else:
    executable = lowered.compile()
    cost = time.perf_counter() - t0
    _KEPT[key] = (executable, cost)
    while len(_KEPT) > KEEP:
      _KEPT.popitem(last=False)
  return Compiled(executable, digest[:16], cost, time.perf_counter() - t0)


def clear() -> None:
  """Forget every kept executable."""
  _KEPT.clear()
