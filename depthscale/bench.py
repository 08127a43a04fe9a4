"""Throughput bench: one grid of models (16 by default) trained by the engine and one model at a time.

Engine dispatches, single-model runs and a matmul-peak probe are interleaved in rounds, so
each round's ratios compare like with like on a shared machine; the JSON reports medians.
Imports core/, model/ and tasks/; must not import depthscale.cli (the CLI calls in here).
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from depthscale import tasks
from depthscale.core import ensemble, train
from depthscale.errors import UserError
from depthscale.model import compact


@dataclasses.dataclass(frozen=True)
class Preset:
  """One bench shape and the step counts that keep it under ~3 minutes on 2 CPU cores."""
  width: int
  depth: int
  seq: int
  batch: int
  heads: int
  engine_k: int           # steps per engine dispatch (lax.scan length); one dispatch per round
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
PEAK_N = 1024
FLOPS_FORMULA = (
    "FLOPs per model step = 6 * P * (batch * seq) + 12 * depth * seq^2 * width * batch, "
    "P = depth * (4 w^2 [q,k,v,o] + 2 * 4 w^2 [mlp]) + w * classes [head] (matmul parameters; "
    "embedding lookups, biases, layer norms, softmax and the optimizer not counted); the "
    "attention term is forward + backward (3x) of QK^T and AV (2 * seq^2 * width flops each "
    "per layer and sequence)")


# `mixed`: one grid of mixed depths trained three ways (run_mixed), not engine vs sequential
MIXED = Preset(width=64, depth=8, seq=32, batch=16, heads=4, engine_k=4, sequential_steps=0,
               rounds=5)
MIXED_DEPTHS, MIXED_SEEDS, MIXED_LRS = tuple(range(1, 9)), (0, 1), (1e-3, 3e-3)
PRESET_NAMES = tuple(PRESETS) + ("mixed",)


def check_preset(name: str) -> Preset:
  """The preset called `name`, or a one-line ValueError listing the valid ones."""
  if name == "mixed":
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


DTYPES = ("float32", "bfloat16")  # the models' compute dtype (parameters stay float32)
PEAK_N_BY_PLATFORM = {"gpu": 8192}  # a GPU needs a bigger matmul to reach its peak


def make_peak_probe(n: int = PEAK_N, repeats: int = 10,
                    dtype: str = "float32") -> Callable[[], float]:
  """A function returning the median GFLOP/s of a jitted [n, n] @ [n, n] (2 n^3) in dtype."""
  a_NxN = jax.random.normal(jax.random.key(0), (n, n), dtype)
  b_NxN = jax.random.normal(jax.random.key(1), (n, n), dtype)
  dot = jax.jit(jnp.dot)
  dot(a_NxN, b_NxN).block_until_ready()

  def probe() -> float:
    times = [_timed(lambda: dot(a_NxN, b_NxN).block_until_ready()) for _ in range(repeats)]
    return 2 * n ** 3 / statistics.median(times) / 1e9
  return probe


def _shard_models(tree, devices):
  """Put every leaf's leading models axis across `devices` (a 1-D mesh named 'models')."""
  mesh = Mesh(np.asarray(devices), ("models",))
  return jax.device_put(tree, NamedSharding(mesh, PartitionSpec("models")))


def init_grid(task, p: Preset, specs, models_per_chunk: int = 0, dtype: str = "float32"):
  """(cfg, tcfg, state_M): the grid's group shape, train config and initial state."""
  cfg = ensemble.group_config(specs, max_len=p.seq, output_dim=task.output_dim(p.seq),
                              vocab=task.input_vocab,
                              compute_dtype=None if dtype == "float32" else dtype)
  total = p.engine_k * (p.rounds + 1) + p.sequential_steps + 1
  tcfg = train.TrainConfig(batch_size=p.batch, length=p.seq, total_steps=total,
                           models_per_chunk=models_per_chunk)
  return cfg, tcfg, train.init_state(ensemble.init_params(specs, cfg), tcfg)


def make_engine(task, p: Preset, specs, devices, log, models_per_chunk: int = 0,
                dtype: str = "float32", layout: str = "pad", name: str = "engine"):
  """Compile and warm up the engine; returns (one timed dispatch -> seconds, compile_s).
  layout compact: the specs run in train.arrange's order (results are not read here)."""
  order, _ = train.arrange(specs, train.TrainConfig(1, 1, 1, layout=layout), len(devices))
  specs = specs if order is None else [specs[i] for i in order]
  cfg, tcfg, state_M = init_grid(task, p, specs, models_per_chunk, dtype)
  _, tcfg = train.arrange(specs, dataclasses.replace(tcfg, layout=layout), len(devices))
  hp_M, arch_M = train.stack_hparams(specs), ensemble.stack_arch(specs, cfg)
  if len(devices) > 1:
    state_M, hp_M, arch_M = _shard_models((state_M, hp_M, arch_M), devices)
  t0 = time.perf_counter()
  chunk = train.make_train_chunk(task, cfg, tcfg, p.engine_k, devices)
  chunk = chunk.lower(state_M, hp_M, arch_M).compile()
  compile_s = time.perf_counter() - t0
  log(f"{name}: compiled in {compile_s:.1f}s; warm-up dispatch of {p.engine_k} steps")
  carry = [chunk(state_M, hp_M, arch_M)[0]]  # the state is donated: keep only the newest
  jax.block_until_ready(carry[0])

  def dispatch():
    carry[0], metrics = chunk(carry[0], hp_M, arch_M)
    jax.block_until_ready(metrics)
  return (lambda: _timed(dispatch)), compile_s


def make_sequential(task, p: Preset, specs, log, dtype: str = "float32"):
  """Compile and warm up one M=1 step; returns (run models `idx` -> seconds, compile_s).

  What a user would write: each model is its own group, trained by a jitted one-step
  function called `sequential_steps` times in a Python loop, then the next model.
  """
  cfg, tcfg, state_M = init_grid(task, p, specs, dtype=dtype)  # all at the grid's shape
  models = [[jax.tree.map(lambda x: x[i:i + 1], state_M), train.stack_hparams([s]),
             ensemble.stack_arch([s], cfg)] for i, s in enumerate(specs)]
  t0 = time.perf_counter()
  step = train.make_train_chunk(task, cfg, tcfg, 1).lower(*models[0]).compile()
  compile_s = time.perf_counter() - t0
  log(f"sequential: compiled in {compile_s:.1f}s; warm-up step")
  models[0][0], metrics = step(*models[0])
  jax.block_until_ready(metrics)

  def run(idx):
    for i in idx:
      state, hp, arch = models[i]
      for _ in range(p.sequential_steps):
        state, metrics = step(state, hp, arch)
      jax.block_until_ready((state, metrics))
      models[i][0] = state
  return (lambda idx: _timed(lambda: run(idx))), compile_s


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


def mixed_specs(p: Preset = MIXED) -> list[ensemble.ModelSpec]:
  """The mixed preset's grid: every depth x seed x learning rate, at one width."""
  return [ensemble.ModelSpec(depth=d, width=p.width, heads=p.heads, seed=s, lr=lr)
          for d in MIXED_DEPTHS for s in MIXED_SEEDS for lr in MIXED_LRS]


def run_mixed(devices: int | None = None, dtype: str = "float32",
              log: Callable[[str], None] = print) -> dict:
  """One mixed-depth grid trained three ways, interleaved in rounds: `compact` (one
  compacted program), `pad` (one padded program), `bucket` (one program per depth, run
  one after another). Rates are useful model-steps/s (every way does the same work)."""
  start, p = time.perf_counter(), MIXED
  task, specs = tasks.make(TASK, **TASK_OPTIONS), mixed_specs()
  n = len(specs)
  devs = resolve_devices(devices, n)
  per_depth = len(MIXED_SEEDS) * len(MIXED_LRS)
  bucket_devs = devs if per_depth % len(devs) == 0 else devs[:1]
  dev = jax.devices()[0]
  log(f"bench mixed: {n} models, depths {MIXED_DEPTHS[0]}-{MIXED_DEPTHS[-1]}, width "
      f"{p.width}, seq {p.seq}, batch {p.batch}, heads {p.heads} on {len(devs)} x "
      f"{dev.device_kind}")
  runs = {}
  for layout in ("compact", "pad"):
    runs[layout] = make_engine(task, p, specs, devs, log, dtype=dtype, layout=layout,
                               name=layout)
  buckets = [make_engine(task, p, specs[i:i + per_depth], bucket_devs, log, dtype=dtype,
                         name=f"bucket depth {specs[i].depth}")
             for i in range(0, n, per_depth)]
  runs["bucket"] = (lambda: sum(dispatch() for dispatch, _ in buckets),
                    sum(c for _, c in buckets))
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
              "bucket": f"{len(buckets)} programs (one per depth), one dispatch each in turn"},
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


def run_bench(preset: str, devices: int | None = None, models_per_chunk: int | None = None,
              dtype: str = "float32", models: int = NUM_MODELS,
              log: Callable[[str], None] = print) -> dict:
  """Engine vs sequential throughput and matmul peak for `preset`, as a JSON-ready dict
  (preset mixed: run_mixed)."""
  start = time.perf_counter()
  p = check_preset(preset)
  if preset == "mixed":
    if dtype not in DTYPES:
      raise UserError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)}")
    return run_mixed(devices, dtype, log)
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
  peak_n = PEAK_N_BY_PLATFORM.get(dev.platform, PEAK_N)
  peak_probe = make_peak_probe(peak_n, dtype=dtype)
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
                         models_per_chunk=train.chunk_size(n, chunk), how=(
      f"all {n} models vmapped in one jitted lax.scan of steps_per_dispatch steps "
      f"(make_train_chunk; models_per_chunk < {n}: the vmapped step runs over chunks of that "
      "many models in a lax.map), one dispatch per round after one warm-up dispatch"))
  modes["sequential"]["how"] = (
      "one M=1 group per model: a jitted one-step make_train_chunk called `steps` times in a "
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
      "matmul_peak_how": f"jitted {dtype} {peak_n}x{peak_n} @ {peak_n}x{peak_n}, 2 n^3 flops, "
                         "median of 10 per round",
      **modes,
      "engine_over_sequential": median(
          lambda row: row["engine_model_steps_per_s"] / row["sequential_model_steps_per_s"]),
      "engine_fraction_of_peak": median(
          lambda row: row["engine_model_steps_per_s"] * flops / 1e9 / row["matmul_peak_gflops"]),
      "ratios": "medians over rounds of each round's own ratio (interleaved on a shared machine)",
      "rounds": rounds,
      "wall_s": time.perf_counter() - start,
  }
