"""Throughput bench: one grid of models (16 by default) trained by the engine and one model at a time.

Engine dispatches, single-model runs and a matmul-peak probe are interleaved in rounds, so
each round's ratios compare like with like on a shared machine; the JSON reports medians.
Every program is built by core/program.py (the one that trains a sweep's group) and the
peak is devices.py's probe. Imports core/, tasks/ and devices.
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable

import jax
import numpy as np

from depthscale import devices as devices_lib
from depthscale import tasks
from depthscale.core import ensemble, program, train
from depthscale.errors import UserError


@dataclasses.dataclass(frozen=True)
class Preset:
  """One bench shape and the step counts that keep it under ~3 minutes on 2 CPU cores."""
  width: int
  depth: int
  seq: int
  batch: int
  heads: int
  engine_k: int           # steps per engine dispatch (n of the program's loop); one per round
  sequential_steps: int   # steps per model in the sequential loop
  rounds: int             # each round: an engine dispatch, models/rounds models in turn, the peak
  models_per_chunk: int = 0  # engine default (0 = all models vmapped at once); see BUILD_NOTES


PRESETS = {
    "tiny": Preset(width=32, depth=2, seq=16, batch=16, heads=4,
                   engine_k=50, sequential_steps=100, rounds=8),
    "small": Preset(width=64, depth=2, seq=32, batch=32, heads=4,
                    engine_k=10, sequential_steps=20, rounds=8, models_per_chunk=2),
    "medium": Preset(width=256, depth=4, seq=64, batch=32, heads=4,
                     engine_k=2, sequential_steps=1, rounds=2, models_per_chunk=2),
}
NUM_MODELS = 16  # default grid: 4 seeds x the 4 learning rates
LRS = (3e-4, 1e-3, 3e-3, 1e-2)
TASK, TASK_OPTIONS = "word_problem", {"group": "A5"}
FLOPS_FORMULA = (
    "FLOPs per model step = 6 * P * (batch * seq) + 12 * depth * seq^2 * width * batch, "
    "P = depth * (4 w^2 [q,k,v,o] + 2 * 4 w^2 [mlp]) + w * classes [head] (matmul parameters; "
    "embedding lookups, biases, layer norms, softmax and the optimizer not counted); the "
    "attention term is forward + backward (3x) of QK^T and AV (2 * seq^2 * width flops each "
    "per layer and sequence)")


# `mixed`: one grid of mixed depths trained three ways (run_mixed), not engine vs sequential
MIXED = Preset(width=64, depth=8, seq=32, batch=16, heads=4, engine_k=4, sequential_steps=0,
               rounds=5)
PRESET_NAMES = tuple(PRESETS) + ("mixed", "refill", "halving")  # bench_refill: the last two


def check_preset(name: str) -> Preset:
  """The preset called `name`, or a one-line ValueError listing the valid ones."""
  if name in ("mixed", "refill", "halving"):
    return MIXED
  if name not in PRESETS:
    raise UserError(f"unknown preset {name!r}; valid presets: {', '.join(PRESET_NAMES)}")
  return PRESETS[name]


def matmul_params(depth: int, width: int, classes: int) -> int:
  """Parameters that take part in matmuls: q,k,v,o (4 w^2) and mlp (8 w^2) per layer, head."""
  return depth * (4 * width ** 2 + 2 * 4 * width ** 2) + width * classes


def flops_per_model_step(depth: int, width: int, seq: int, batch: int, classes: int) -> int:
  """Training FLOPs of one model for one step (see FLOPS_FORMULA)."""
  dense = 6 * matmul_params(depth, width, classes) * batch * seq
  attention = 12 * depth * seq ** 2 * width * batch
  return dense + attention


def check_models(models: int) -> int:
  """`models`, or a one-line ValueError unless it is a positive multiple of len(LRS)."""
  if isinstance(models, bool) or not isinstance(models, int) or models < len(LRS) \
      or models % len(LRS):
    raise UserError(f"--models must be a positive multiple of {len(LRS)} (seeds x the "
                     f"{len(LRS)} learning rates), got {models!r}")
  return models


def grid_specs(p: Preset, models: int = NUM_MODELS) -> list[ensemble.ModelSpec]:
  """`models` models: seeds 0.. x the learning rates LRS, all at the preset's shape."""
  return [ensemble.ModelSpec(depth=p.depth, width=p.width, heads=p.heads, seed=s, lr=lr)
          for s in range(models // len(LRS)) for lr in LRS]


def _timed(fn: Callable[[], object]) -> float:
  t0 = time.perf_counter()
  fn()
  return time.perf_counter() - t0


DTYPES = devices_lib.DTYPES  # the models' compute dtype (parameters stay float32)


def train_config(p: Preset, models_per_chunk: int = 0, layout: str = "pad"):
  """The grid's TrainConfig (enough total steps for every round; never reached)."""
  total = p.engine_k * (p.rounds + 1) + p.sequential_steps + 1
  return train.TrainConfig(batch_size=p.batch, length=p.seq, total_steps=total,
                           models_per_chunk=models_per_chunk, layout=layout)


def make_engine(task, p: Preset, specs, devices, log, models_per_chunk: int = 0,
                dtype: str = "float32", layout: str = "pad", name: str = "engine"):
  """Build (core/program.py) and warm up the engine; returns (one timed dispatch of
  engine_k steps -> seconds, compile_s)."""
  prog = program.build(task, specs, train_config(p, models_per_chunk, layout),
                       dict(compute_dtype=dtype), p.engine_k, devices)
  log(f"{name}: compiled in {prog.compile_s:.1f}s; warm-up dispatch of {p.engine_k} steps")
  k = np.int32(p.engine_k)
  carry = [prog.run(prog.state, prog.hp, prog.arch, k)[0]]  # donated: keep the newest
  jax.block_until_ready(carry[0])

  def dispatch():
    carry[0], metrics = prog.run(carry[0], prog.hp, prog.arch, k)
    jax.block_until_ready(metrics)
  return (lambda: _timed(dispatch)), prog.compile_s


def make_sequential(task, p: Preset, specs, log, dtype: str = "float32"):
  """Build one M=1 one-step program and warm it up; returns (run models `idx` -> seconds,
  compile_s).

  What a user would write: each model is its own group, trained by a jitted one-step
  function called `sequential_steps` times in a Python loop, then the next model.
  """
  dev = jax.local_devices()[:1]
  prog = program.build(task, specs[:1], train_config(p), dict(compute_dtype=dtype), 1, dev)
  models = [list(program.init_inputs([s], prog.cfg, prog.tcfg, dev)) for s in specs]
  log(f"sequential: compiled in {prog.compile_s:.1f}s; warm-up step")
  one = np.int32(1)
  models[0][0], metrics = prog.run(*models[0], one)
  jax.block_until_ready(metrics)

  def run(idx):
    for i in idx:
      state, hp, arch = models[i]
      for _ in range(p.sequential_steps):
        state, metrics = prog.run(state, hp, arch, one)
      jax.block_until_ready((state, metrics))
      models[i][0] = state
  return (lambda idx: _timed(lambda: run(idx))), prog.compile_s


def resolve_devices(count: int | None, models: int = NUM_MODELS) -> list:
  """The first `count` local devices (all if None); a ValueError if the models don't split."""
  local = jax.local_devices()
  if count is None:
    count = len(local) if models % len(local) == 0 else 1
  if not 1 <= count <= len(local):
    hint = (f"; to split a CPU into {count} devices set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={count}"
            if local[0].platform == "cpu" and count > len(local) else "")
    raise UserError(f"--devices must be between 1 and {len(local)} (the local devices), "
                     f"got {count}{hint}")
  if models % count:
    raise UserError(f"--devices must divide the {models} models evenly, got {count}")
  return local[:count]


def run_bench(preset: str, devices: int | None = None, models_per_chunk: int | None = None,
              dtype: str = "float32", models: int = NUM_MODELS,
              log: Callable[[str], None] = print) -> dict:
  """Engine vs sequential throughput and matmul peak for `preset`, as a JSON-ready dict
  (preset mixed: bench_mixed.run_mixed)."""
  start = time.perf_counter()
  p = check_preset(preset)
  if preset == "mixed":
    raise ValueError("the mixed preset is bench_mixed.run_mixed")
  if dtype not in DTYPES:
    raise UserError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)}")
  n = check_models(models)
  chunk = p.models_per_chunk if models_per_chunk is None else models_per_chunk
  devs = resolve_devices(devices, n)
  task, specs = tasks.make(TASK, **TASK_OPTIONS), grid_specs(p, n)
  classes = task.output_dim(p.seq)
  flops = flops_per_model_step(p.depth, p.width, p.seq, p.batch, classes)
  dev = jax.devices()[0]
  log(f"bench {preset}: {n} models, width {p.width}, depth {p.depth}, seq {p.seq}, "
      f"batch {p.batch}, heads {p.heads} on {len(devs)} x {dev.device_kind}")
  peak_n = devices_lib.probe_size(dev.platform)
  peak_probe = lambda: devices_lib.matmul_peak_gflops(dtype, n=peak_n, device=devs[0])
  engine_dispatch, engine_compile_s = make_engine(task, p, specs, devs, log, chunk, dtype)
  sequential_run, sequential_compile_s = make_sequential(task, p, specs, log, dtype)
  rounds = []
  for r in range(p.rounds):
    idx = list(range(r, n, p.rounds))
    engine_rate = n * p.engine_k / engine_dispatch()
    sequential_rate = len(idx) * p.sequential_steps / sequential_run(idx)
    peak = peak_probe()
    rounds.append({"engine_model_steps_per_s": engine_rate,
                   "sequential_model_steps_per_s": sequential_rate, "matmul_peak_gflops": peak,
                   "sequential_models": idx})
    log(f"round {r + 1}/{p.rounds}: engine {engine_rate:.1f} model-steps/s, sequential "
        f"{sequential_rate:.1f} (models {idx}), matmul peak {peak:.1f} GFLOP/s")
  median = lambda f: statistics.median(f(row) for row in rounds)
  modes = {}
  for mode, compile_s in (("engine", engine_compile_s), ("sequential", sequential_compile_s)):
    rate = median(lambda row: row[f"{mode}_model_steps_per_s"])
    modes[mode] = {"model_steps_per_s": rate, "gflops": rate * flops / 1e9,
                   "compile_s": compile_s}
  modes["engine"].update(steps_per_dispatch=p.engine_k, devices=len(devs),
                         models_per_chunk=program.chunk_size(n, chunk), how=(
      f"all {n} models vmapped in one program of steps_per_dispatch steps (core/program.py, "
      f"as a sweep trains a group; models_per_chunk < {n}: the vmapped step runs over chunks "
      "of that many models in a lax.map), one dispatch per round after one warm-up dispatch"))
  modes["sequential"]["how"] = (
      "one M=1 group per model: a one-step program (core/program.py) called `steps` times in a "
      f"Python loop, then the next model; rounds split the {n} models between them")
  return {
      "preset": {"name": preset, **dataclasses.asdict(p), "task": TASK, **TASK_OPTIONS,
                 "classes": classes, "models": n,
                 "grid": {"seeds": list(range(n // len(LRS))), "lrs": list(LRS),
                          "note": f"{n} models of one shape, differing in seed and "
                                  "learning rate"}},
      "device": {"kind": dev.device_kind, "platform": dev.platform,
                 "count": jax.device_count(), "used_by_engine": len(devs)},
      "steps": {"engine": p.engine_k * p.rounds, "sequential": p.sequential_steps},
      "flops_per_model_step": flops,
      "flops_formula": FLOPS_FORMULA,
      "matmul_peak_gflops": median(lambda row: row["matmul_peak_gflops"]),
      "dtype": {"compute": dtype, "parameters": "float32"},
      "matmul_peak_how": f"jitted {dtype} {peak_n}x{peak_n} @ {peak_n}x{peak_n} at precision "
                         "highest, 2 n^3 flops, median of 10 per round (devices.py)",
      **modes,
      "engine_over_sequential": median(
          lambda row: row["engine_model_steps_per_s"] / row["sequential_model_steps_per_s"]),
      "engine_fraction_of_peak": median(
          lambda row: row["engine_model_steps_per_s"] * flops / 1e9 / row["matmul_peak_gflops"]),
      "ratios": "medians over rounds of each round's own ratio (interleaved on a shared machine)",
      "rounds": rounds,
      "wall_s": time.perf_counter() - start,
  }
