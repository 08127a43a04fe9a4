"""The `mixed` bench preset: one grid of mixed depths trained three ways, interleaved in
rounds (one compacted program, one padded program, one program per depth in turn).

Programs are built and warmed up by bench/programs.py (make_engine).
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable

import jax

from depthscale import tasks
from depthscale.bench import registry, shapes
from depthscale.bench.programs import make_engine
from depthscale.bench.shapes import TASK, TASK_OPTIONS
from depthscale.core import ensemble
from depthscale.model import compact

MIXED = shapes.Preset(width=64, depth=8, seq=32, batch=16, heads=4, engine_k=4,
                      sequential_steps=0, rounds=5)
MIXED_DEPTHS, MIXED_SEEDS, MIXED_LRS = tuple(range(1, 9)), (0, 1), (1e-3, 3e-3)
WAYS = ("compact", "pad", "bucket")


def mixed_specs(p: shapes.Preset = MIXED) -> list[ensemble.ModelSpec]:
  """The mixed preset's grid: every depth x seed x learning rate, at one width."""
  return [ensemble.ModelSpec(depth=d, width=p.width, heads=p.heads, seed=s, lr=lr)
          for d in MIXED_DEPTHS for s in MIXED_SEEDS for lr in MIXED_LRS]


def _ways(task, p, specs, devs, bucket_devs, per_depth, dtype, log) -> dict:
  """{way: (one timed dispatch of every model -> seconds, compile_s)} for WAYS."""
  runs = {}
  for layout in ("compact", "pad"):
    runs[layout] = make_engine(task, p, specs, devs, log, dtype=dtype, layout=layout,
                               name=layout)
  buckets = [make_engine(task, p, specs[i:i + per_depth], bucket_devs, log, dtype=dtype,
                         name=f"bucket depth {specs[i].depth}")
             for i in range(0, len(specs), per_depth)]
  runs["bucket"] = (lambda: sum(dispatch() for dispatch, _ in buckets),
                    sum(c for _, c in buckets))
  return runs


def run_mixed(devices: int | None = None, dtype: str = "float32",
              log: Callable[[str], None] = print) -> dict:
  """One mixed-depth grid trained three ways, interleaved in rounds: `compact` (one
  compacted program), `pad` (one padded program), `bucket` (one program per depth, run
  one after another). Rates are useful model-steps/s (every way does the same work)."""
  shapes.check_dtype(dtype)
  start, p = time.perf_counter(), MIXED
  task, specs = tasks.make(TASK, **TASK_OPTIONS), mixed_specs(p)
  n = len(specs)
  devs = shapes.resolve_devices(devices, n)
  per_depth = len(MIXED_SEEDS) * len(MIXED_LRS)
  bucket_devs = devs if per_depth % len(devs) == 0 else devs[:1]
  dev = jax.devices()[0]
  log(f"bench mixed: {n} models, depths {MIXED_DEPTHS[0]}-{MIXED_DEPTHS[-1]}, width "
      f"{p.width}, seq {p.seq}, batch {p.batch}, heads {p.heads} on {len(devs)} x "
      f"{dev.device_kind}")
  runs = _ways(task, p, specs, devs, bucket_devs, per_depth, dtype, log)
  rounds = []
  for r in range(p.rounds):
    row = {f"{k}_model_steps_per_s": n * p.engine_k / dispatch()
           for k, (dispatch, _) in runs.items()}
    rounds.append(row)
    log(f"round {r + 1}/{p.rounds}: " + ", ".join(
        f"{k} {row[f'{k}_model_steps_per_s']:.1f}" for k in runs) + " model-steps/s")
  median = lambda f: statistics.median(f(row) for row in rounds)
  out = {k: {"model_steps_per_s": median(lambda row: row[f"{k}_model_steps_per_s"]),
             "compile_s": compile_s} for k, (_, compile_s) in runs.items()}
  ratio = lambda a, b: median(lambda row: row[f"{a}_model_steps_per_s"]
                              / row[f"{b}_model_steps_per_s"])
  useful = sum(d for d in MIXED_DEPTHS) * per_depth
  buckets = -(-n // per_depth)  # as _ways makes them
  return {
      "preset": {"name": "mixed", **dataclasses.asdict(p), "task": TASK, **TASK_OPTIONS,
                 "models": n, "grid": {"depths": list(MIXED_DEPTHS), "seeds": list(MIXED_SEEDS),
                                       "lrs": list(MIXED_LRS)}},
      "device": {"kind": dev.device_kind, "platform": dev.platform,
                 "count": jax.device_count(), "used": len(devs),
                 "used_by_bucket": len(bucket_devs)},
      "dtype": {"compute": dtype, "parameters": "float32"},
      **out,
      "how": {"compact": "one program, layout compact (each layer band only on the models "
                         "that have it)",
              "pad": "one program, every model runs the deepest model's layers (masked)",
              "bucket": f"{buckets} programs (one per depth), one dispatch each in turn"},
      "layers": {"useful": useful, "pad": MIXED_DEPTHS[-1] * n,
                 "compact": compact.computed_layers(compact.profile(
                     [(s.depth, s.repeats) for s in specs], len(devs)))},
      "compact_over_pad": ratio("compact", "pad"),
      "compact_over_bucket": ratio("compact", "bucket"),
      "compact_compile_over_pad": out["compact"]["compile_s"] / out["pad"]["compile_s"],
      "ratios": "medians over rounds of each round's own ratio (interleaved on a shared machine)",
      "steps_per_dispatch": p.engine_k,
      "rounds": rounds,
      "wall_s": time.perf_counter() - start,
  }


def summary(result: dict) -> str:
  return (", ".join(f"{k} {result[k]['model_steps_per_s']:.1f}" for k in WAYS)
          + f" model-steps/s; compact/pad {result['compact_over_pad']:.2f}, compact/bucket "
          f"{result['compact_over_bucket']:.2f}")


registry.register("mixed", lambda o, log: run_mixed(o.devices, o.dtype or "float32", log),
                  summary, uses=("devices", "dtype"))
