"""The engine presets (tiny, small, medium): one grid of models (16 by default) trained by
the engine and one model at a time, against the matmul peak.

Engine dispatches, single-model runs and a matmul-peak probe are interleaved in rounds, so
each round's ratios compare like with like on a shared machine; the JSON reports medians.
The programs are bench/programs.py's, the FLOP count the planner's (sweep/plan.py).
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable

import jax

from depthscale import devices as devices_lib
from depthscale import tasks
from depthscale.bench import registry, shapes
from depthscale.bench.programs import make_engine, make_sequential
from depthscale.bench.shapes import PRESETS, TASK, TASK_OPTIONS
from depthscale.core import chunks, program
from depthscale.errors import UserError
from depthscale.sweep import plan

FLOPS_FORMULA = (
    "FLOPs per model step = 6 * P * (batch * seq) + 12 * depth * seq^2 * width * batch, "
    "P = depth * (4 w^2 [q,k,v,o] + 2 * 4 w^2 [mlp]) + w * classes [head] (matmul parameters; "
    "embedding lookups, biases, layer norms, softmax and the optimizer not counted); the "
    "attention term is forward + backward (3x) of QK^T and AV (2 * seq^2 * width flops each "
    "per layer and sequence)")


def check_preset(name: str) -> shapes.Preset:
  """The engine preset called `name`, or a one-line UserError listing the valid ones."""
  if name not in PRESETS:
    raise UserError(f"unknown preset {name!r}; valid presets: {', '.join(PRESETS)}")
  return PRESETS[name]


def flops_per_model_step(depth: int, width: int, seq: int, batch: int, classes: int) -> int:
  """Training FLOPs of one model for one step (see FLOPS_FORMULA): the planner's count
  (plan.step_flops) of one model at mlp_ratio 4."""
  return int(plan.step_flops(depth, width, 1, seq, batch, out_dim=classes))


def _rounds(p, n, engine_dispatch, sequential_run, peak_probe, log) -> list[dict]:
  """Each round: one engine dispatch, its share of the models one at a time, the peak."""
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
  return rounds


def _modes(rounds, compiles, flops, p, n, chunk, devs) -> dict:
  """{"engine": ..., "sequential": ...}: each mode's median rate, GFLOP/s, compile and how."""
  median = lambda f: statistics.median(f(row) for row in rounds)
  modes = {}
  for mode, compile_s in zip(("engine", "sequential"), compiles):
    rate = median(lambda row: row[f"{mode}_model_steps_per_s"])
    modes[mode] = {"model_steps_per_s": rate, "gflops": rate * flops / 1e9,
                   "compile_s": compile_s}
  modes["engine"].update(steps_per_dispatch=p.engine_k, devices=len(devs),
                         models_per_chunk=chunks.chunk_size(n, chunk), how=(
      f"all {n} models vmapped in one program of steps_per_dispatch steps (core/program.py, "
      f"as a sweep trains a group; models_per_chunk < {n}: the vmapped step runs over chunks "
      "of that many models in a lax.map), one dispatch per round after one warm-up dispatch"))
  modes["sequential"]["how"] = (
      "one M=1 group per model: a one-step program (core/program.py) called `steps` times in a "
      f"Python loop, then the next model; rounds split the {n} models between them")
  return modes


def run_bench(preset: str, devices: int | None = None, models_per_chunk: int | None = None,
              dtype: str | None = None, models: int | None = None,
              log: Callable[[str], None] = print) -> dict:
  """Engine vs sequential throughput and matmul peak for `preset` (its own models and
  dtype unless given), as a JSON-ready dict."""
  start = time.perf_counter()
  defined = check_preset(preset)
  dtype = shapes.check_dtype(dtype or defined.dtype)
  n = shapes.check_models(defined.models if models is None else models, defined.lrs)
  devs = shapes.resolve_devices(devices, n)
  p = shapes.on_platform(defined, devs[0].platform)
  if p is not defined:
    log(f"bench {preset}: on a CPU at width {p.width}, seq {p.seq}, batch {p.batch} "
        f"(defined: width {defined.width}, seq {defined.seq}, batch {defined.batch}, "
        "minutes per step here; run it on a GPU)")
  chunk = p.chunk_on(devs[0].platform) if models_per_chunk is None else models_per_chunk
  task, specs = tasks.make(TASK, **TASK_OPTIONS), shapes.grid_specs(p, n)
  classes = task.output_dim(p.seq)
  flops = flops_per_model_step(p.depth, p.width, p.seq, p.batch, classes)
  dev = jax.devices()[0]
  log(f"bench {preset}: {n} models, width {p.width}, depth {p.depth}, seq {p.seq}, "
      f"batch {p.batch}, heads {p.heads} on {len(devs)} x {dev.device_kind}")
  peak_n = devices_lib.probe_size(dev.platform)
  peak_probe = lambda: devices_lib.matmul_peak_gflops(dtype, n=peak_n, device=devs[0])
  engine_dispatch, engine_compile_s = make_engine(task, p, specs, devs, log, chunk, dtype)
  sequential_run, sequential_compile_s = make_sequential(task, p, specs, log, dtype)
  rounds = _rounds(p, n, engine_dispatch, sequential_run, peak_probe, log)
  median = lambda f: statistics.median(f(row) for row in rounds)
  return {
      "preset": {"name": preset, **dataclasses.asdict(p), "task": TASK, **TASK_OPTIONS,
                 "classes": classes, "models": n, "as_defined": p is defined,
                 "grid": {"seeds": list(range(n // len(p.lrs))), "lrs": list(p.lrs),
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
      **_modes(rounds, (engine_compile_s, sequential_compile_s), flops, p, n, chunk, devs),
      "engine_over_sequential": median(
          lambda row: row["engine_model_steps_per_s"] / row["sequential_model_steps_per_s"]),
      "engine_fraction_of_peak": median(
          lambda row: row["engine_model_steps_per_s"] * flops / 1e9 / row["matmul_peak_gflops"]),
      "ratios": "medians over rounds of each round's own ratio (interleaved on a shared machine)",
      "rounds": rounds,
      "wall_s": time.perf_counter() - start,
  }


def summary(result: dict) -> str:
  e, s = result["engine"], result["sequential"]
  return (f"engine {e['model_steps_per_s']:.1f} model-steps/s ({e['gflops']:.1f} GFLOP/s), "
          f"sequential {s['model_steps_per_s']:.1f} ({s['gflops']:.1f} GFLOP/s), "
          f"ratio {result['engine_over_sequential']:.2f}, peak "
          f"{result['matmul_peak_gflops']:.1f} GFLOP/s, engine at "
          f"{100 * result['engine_fraction_of_peak']:.0f}% of peak")


def _register(name: str) -> None:
  registry.register(name, lambda o, log: run_bench(
      name, devices=o.devices, models_per_chunk=o.models_per_chunk, dtype=o.dtype,
      models=o.models, log=log), summary,
      uses=("devices", "models_per_chunk", "dtype", "models"))


for _name in PRESETS:
  _register(_name)
