"""Probes: compile a group's program on the devices JAX sees, time a few steps, read XLA's
memory analysis. Cached per program signature and device kind, so `plan` and `run` (and
every worker on a host that shares the cache) measure each program once.

Cache: $DEPTHSCALE_CACHE/probes (default ~/.cache/depthscale/probes), one JSON per program.
Imports sweep.group and core/; writes only its cache.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import statistics
import tempfile
import time

import jax
import numpy as np

from depthscale.core import train
from depthscale.sweep import group as group_lib

TIME_S = 0.5   # target seconds of each timed dispatch
TIMED = 3      # timed dispatches (the median is kept)


@dataclasses.dataclass(frozen=True)
class Probe:
  """What one program costs on one device kind and count."""
  compile_s: float
  step_s: float          # seconds per training step of the whole group
  memory_bytes: int      # per device: arguments + outputs - donated + temporaries
  device_kind: str
  devices: int


def cache_dir() -> str:
  root = os.environ.get("DEPTHSCALE_CACHE") or os.path.join(
      os.path.expanduser("~"), ".cache", "depthscale")
  return os.path.join(root, "probes")


def signature(task, specs, tcfg: train.TrainConfig, model: dict, steps_per_call: int,
              devices) -> str:
  """The program's identity: everything it is compiled from (the task, the padded
  shape, the train config, M, the model options) and the device kind and count. Seeds
  and learning rates are data, not part of it."""
  cfg = group_lib.model_config(task, specs, tcfg, model)
  shapes = sorted(s.shape() for s in specs)
  text = repr((repr(task), cfg, dataclasses.astuple(tcfg), len(specs), shapes, steps_per_call,
               devices[0].device_kind, len(devices), jax.__version__))
  return hashlib.sha1(text.encode()).hexdigest()[:16]


def cached(sig: str) -> Probe | None:
  path = os.path.join(cache_dir(), sig + ".json")
  try:
    with open(path) as f:
      return Probe(**json.load(f))
  except (OSError, ValueError, TypeError):  # absent, or written by another version
    return None


def store(sig: str, probe: Probe) -> None:
  d = cache_dir()
  os.makedirs(d, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=d, prefix=".probe-")
  with os.fdopen(fd, "w") as f:
    json.dump(dataclasses.asdict(probe), f)
  os.replace(tmp, os.path.join(d, sig + ".json"))


def compile_group(task, specs, tcfg, model, steps_per_call, devices):
  """(compiled program, its inputs, compile seconds) of a group as train_group runs it."""
  specs = group_lib.fill(specs, len(devices))
  order, tcfg = train.arrange(specs, tcfg, len(devices))
  cfg, state, hp, arch = group_lib.build(task, group_lib.in_order(specs, order), tcfg, model,
                                         devices=devices)
  t0 = time.perf_counter()
  fn = train.make_train_steps(task, cfg, tcfg, steps_per_call, devices)
  compiled = fn.lower(state, hp, arch, np.int32(1)).compile()
  return compiled, (state, hp, arch), time.perf_counter() - t0


def measure_memory(task, specs, tcfg, model, steps_per_call, devices) -> int:
  """Compiled memory per device of a group's program, without running it (cached)."""
  sig = signature(task, specs, tcfg, model, steps_per_call, devices)
  hit = cached(sig)
  if hit is not None:
    return hit.memory_bytes
  if sig not in _MEMORY:
    compiled, _, _ = compile_group(task, specs, tcfg, model, steps_per_call, devices)
    _MEMORY[sig] = group_lib.compiled_memory_bytes(compiled)
  return _MEMORY[sig]


_MEMORY: dict[str, int] = {}  # signature -> bytes, measured in this process


def probe(task, specs, tcfg, model, steps_per_call, devices, use_cache=True) -> Probe:
  """Compile the group's program, run it once, then time TIMED dispatches of about
  TIME_S each; cached by signature."""
  sig = signature(task, specs, tcfg, model, steps_per_call, devices)
  if use_cache and (hit := cached(sig)) is not None:
    return hit
  compiled, (state, hp, arch), compile_s = compile_group(task, specs, tcfg, model,
                                                         steps_per_call, devices)

  def timed(n):
    nonlocal state
    t0 = time.perf_counter()
    state, met = compiled(state, hp, arch, np.int32(n))
    jax.block_until_ready((state, met))
    return time.perf_counter() - t0

  timed(1)  # warm-up
  one = timed(1)
  n = max(1, min(steps_per_call, int(TIME_S / max(one, 1e-6))))
  step_s = statistics.median(timed(n) for _ in range(TIMED)) / n
  out = Probe(compile_s=compile_s, step_s=step_s, memory_bytes=group_lib.compiled_memory_bytes(compiled),
              device_kind=devices[0].device_kind, devices=len(devices))
  store(sig, out)
  return out
