"""Probes: compile a group's program on the devices JAX sees, time a few steps, read XLA's
memory analysis. Cached per program signature and device kind, so `plan` and `run` (and
every worker on a host that shares the cache) measure each program once.

Cache: $DEPTHSCALE_CACHE/probes (default ~/.cache/depthscale/probes), one JSON per program
(keyed by its blueprint's signature). Also the rate and memory limit a plan assumes on
these devices, and the memory fit.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import sys
import time

import jax
import numpy as np

from depthscale import devices as devices_lib
from depthscale.core import program
from depthscale.io import atomic
from depthscale.sweep import plan

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
  fingerprint: str = ""  # of the lowered program (core/program.py), as a GroupRun's


def cache_dir() -> str:
  root = os.environ.get("DEPTHSCALE_CACHE") or os.path.join(
      os.path.expanduser("~"), ".cache", "depthscale")
  return os.path.join(root, "probes")


def cached(sig: str) -> Probe | None:
  path = os.path.join(cache_dir(), sig + ".json")
  try:
    with open(path) as f:
      hit = Probe(**json.load(f))
  except (OSError, ValueError, TypeError):  # absent, or written by another version
    return None
  return hit if _sound(hit) else None  # damaged or edited: measured again, overwritten


def _sound(p: Probe) -> bool:
  """True if every field of a cached probe is what `probe` writes (times finite and > 0)."""
  num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
  count = lambda v: isinstance(v, int) and not isinstance(v, bool)
  return (num(p.compile_s) and p.compile_s >= 0 and num(p.step_s) and p.step_s > 0
          and count(p.memory_bytes) and p.memory_bytes >= 0 and count(p.devices)
          and p.devices >= 1 and isinstance(p.device_kind, str)
          and isinstance(p.fingerprint, str))


_UNWRITABLE: set = set()  # cache directories already said to be unwritable


def store(sig: str, probe: Probe) -> None:
  """Keep a probe for the next command; an unwritable cache (a read-only home, HOME set
  to nowhere) costs only the reuse: one line, once per directory, and the run goes on."""
  where = cache_dir()
  try:
    atomic.write(os.path.join(where, sig + ".json"), json.dumps(dataclasses.asdict(probe)))
  except OSError as e:
    if where not in _UNWRITABLE:
      _UNWRITABLE.add(where)
      print(f"depthscale: the probe cache {where} is not writable ({e.strerror or e}); "
            "probes are measured again by each command (set DEPTHSCALE_CACHE to a "
            "writable directory to keep them)", file=sys.stderr)


def measure_memory(bp: program.Blueprint, devices) -> int:
  """Compiled memory per device of a blueprint's program, without running it (cached)."""
  sig = bp.signature(devices)
  hit = cached(sig)
  if hit is not None:
    return hit.memory_bytes
  if sig not in _MEMORY:
    _MEMORY[sig] = program.build(bp, devices).memory_bytes
  return _MEMORY[sig]


_MEMORY: dict[str, int] = {}  # signature -> bytes, measured in this process


def probe(bp: program.Blueprint, devices, use_cache=True) -> Probe:
  """Compile the blueprint's program, run it once, then time TIMED dispatches of about
  TIME_S each; cached by signature."""
  sig = bp.signature(devices)
  if use_cache and (hit := cached(sig)) is not None:
    return hit
  prog = program.build(bp, devices)
  # timed at the grid's last stage: the full length's bucket (without growth), the
  # longest a model of the grid trains at; stage 0 would time the shortest bucket
  tcfg, last = prog.tcfg, len(prog.tcfg.grid_stages()) - 1
  put = lambda x, v: jax.device_put(np.full(x.shape, v, x.dtype), x.sharding)
  state = prog.state.replace(stage=put(prog.state.stage, last))
  if tcfg.curriculum == "fixed":  # its stage follows the step count
    state = state.replace(step=put(state.step, last * max(tcfg.steps_per_stage, 1)))

  def timed(n):
    nonlocal state
    t0 = time.perf_counter()
    state, met = prog.run(state, prog.hp, prog.arch, np.int32(n))
    jax.block_until_ready((state, met))
    return time.perf_counter() - t0

  timed(1)  # warm-up
  one = timed(1)
  n = max(1, min(bp.steps_per_call, int(TIME_S / max(one, 1e-6))))
  step_s = statistics.median(timed(n) for _ in range(TIMED)) / n
  out = Probe(compile_s=prog.compile_cost_s, step_s=step_s, memory_bytes=prog.memory_bytes,
              device_kind=devices[0].device_kind, devices=len(devices),
              fingerprint=prog.fingerprint)
  store(sig, out)
  return out


def flops_per_s(study, devs) -> float:
  """The rate the planner's `auto` strategy assumes: the table's peak for a known
  accelerator in the study's peak dtype times plan.mfu; plan.gflops otherwise (CPU)."""
  spec = devices_lib.from_kind(devs[0].device_kind)
  if spec is None:
    return study.config.plan.gflops * 1e9
  return devices_lib.rate(spec.peak_flops(study.peak_dtype), study.config.plan.mfu, len(devs))


def memory_limit(study, devs) -> float | None:
  """Bytes one device may use: plan.device_memory_gb if set, else the runtime's limit
  (GPU/TPU); None (no fit) on a CPU without plan.device_memory_gb."""
  if study.config.plan.device_memory_gb:
    return study.config.plan.device_memory_gb * 2**30
  return devices_lib.memory_limit_bytes(devs[0])


def fit(study, groups, devs, log=lambda line: None):
  """The groups after the memory fit (plan.fit_memory), each candidate measured from
  XLA's compiled memory analysis of its program (cached per signature)."""
  limit = memory_limit(study, devs)
  if limit is None:
    return groups
  measure = lambda g: measure_memory(study.program(g), devs)
  return plan.fit_memory(groups, limit, measure, study, log=log)


def of_group(study, g, devs, use_cache=True) -> Probe:
  """probe() of group g's program, as the study trains it on `devs`."""
  return probe(study.program(g), devs, use_cache)


def cached_for(study, g, devs) -> Probe | None:
  """The probe `depthscale plan` (or an earlier worker) measured for group g's program
  on these devices, or None."""
  return cached(study.program(g).signature(devs))
