"""Programs kept in memory for the life of a process: executables by what they are compiled
from (the lowered program's text and the devices it runs on), and the jitted functions
they are lowered from by what those are made from (kept_function).

A program built again in one process (the group that `run` trains after the probe timed
it, a queue rebuilt to a shape it had before, a group resumed in the same process, a
test's repeated group) is traced and lowered once (its kept function) and compiled once.
The text holds the shapes, dtypes, shardings and every lowering setting (matmul precision
included), so two programs with equal text and devices compile to the same executable;
JAX's `jax_disable_most_optimizations`, a compile setting outside the text, is part of
the key too. The last KEEP are kept (executables only: no buffers).
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
  """An executable, the fingerprint of its lowered text, the seconds its lowering and
  compile took (when first compiled) and the seconds this request spent (about 0 when
  kept)."""
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


def compile_lowered(lowered, devices, lower_s: float = 0.0) -> Compiled:
  """`lowered.compile()`, or the executable kept from an equal program on the same
  devices. `lower_s`: what tracing and lowering it took, counted in its compile cost
  when it is first compiled (a kept function lowers again in about 0 s)."""
  t0 = time.perf_counter()
  digest = hashlib.sha256(lowered.as_text().encode()).hexdigest()
  key = (digest, tuple((d.platform, d.id) for d in devices),
         jax.config.values.get("jax_disable_most_optimizations"))
  if key in _KEPT:
    _KEPT.move_to_end(key)
    executable, cost = _KEPT[key]
  else:
    executable = lowered.compile()
    cost = lower_s + time.perf_counter() - t0
    _KEPT[key] = (executable, cost)
    while len(_KEPT) > KEEP:
      _KEPT.popitem(last=False)
  return Compiled(executable, digest[:16], cost, time.perf_counter() - t0)


def memory_bytes(executable) -> int:
  """Peak bytes per device from XLA's memory analysis of a compiled program: arguments
  + outputs - donated (aliased) + temporaries."""
  m = executable.memory_analysis()
  return int(m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes
             + m.temp_size_in_bytes)


KEEP_FUNCTIONS = 16
_FUNCTIONS: collections.OrderedDict = collections.OrderedDict()


def kept_function(key, make):
  """make() (a jitted function), or what it gave for an equal key earlier in this process
  (the last KEEP_FUNCTIONS). JAX keeps a jitted function's traces and lowerings by its
  arguments' shapes, dtypes and shardings and its own settings (x64, matmul precision),
  so a program built again from an equal key is not traced and lowered again either:
  `run` after the probe timed it, a group resumed or rebuilt to a shape it had, a test's
  repeated group. `key` must hold everything the function is made from. Only traces are
  held (programs built from it run through compile_lowered's executables)."""
  return keep(_FUNCTIONS, key, make, KEEP_FUNCTIONS)


_STEPS: collections.OrderedDict = collections.OrderedDict()


def kept_step(key, make):
  """kept_function for one model's step, jitted inline (core/program._one_step): traced
  once per one-model shape however many models are vmapped over it (a queue's rebuilt
  programs, the probe's and the run's). Kept apart from the programs' functions, so
  that they never push one of those out."""
  return keep(_STEPS, key, make, KEEP_FUNCTIONS)


def keep(store: collections.OrderedDict, key, make, limit: int):
  """make(), or what it gave for an equal key in `store` earlier in this process (the
  last `limit` kept)."""
  if key not in store:
    store[key] = make()
    while len(store) > limit:
      store.popitem(last=False)
  store.move_to_end(key)
  return store[key]


def clear() -> None:
  """Forget every kept executable and function."""
  _KEPT.clear()
  _FUNCTIONS.clear()
  _STEPS.clear()
