"""Throughput bench: one grid of 16 models trained by the engine, then one model at a time.

Reports model-steps/s and achieved GFLOP/s of both, and the device's measured matmul peak.
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


@dataclasses.dataclass(frozen=True)
class Preset:
  """One bench shape and the step counts that keep it under ~3 minutes on 2 CPU cores."""
  width: int
  depth: int
  seq: int
  batch: int
  heads: int
  engine_k: int           # steps per engine dispatch (lax.scan length)
  engine_calls: int       # timed engine dispatches (median taken)
  sequential_steps: int   # timed steps per model in the sequential loop


PRESETS = {
    "tiny": Preset(width=32, depth=2, seq=16, batch=16, heads=4,
                   engine_k=50, engine_calls=5, sequential_steps=50),
    "small": Preset(width=64, depth=2, seq=32, batch=32, heads=4,
                    engine_k=20, engine_calls=5, sequential_steps=20),
    "medium": Preset(width=256, depth=4, seq=64, batch=32, heads=4,
                     engine_k=2, engine_calls=2, sequential_steps=1),
}
NUM_MODELS = 16
SEEDS = (0, 1, 2, 3)
LRS = (3e-4, 1e-3, 3e-3, 1e-2)
TASK, TASK_OPTIONS = "word_problem", {"group": "A5"}
FLOPS_FORMULA = (
    "FLOPs per model step = 6 * P * (batch * seq) + 12 * depth * seq^2 * width * batch, "
    "P = depth * (4 w^2 [q,k,v,o] + 2 * 4 w^2 [mlp]) + w * classes [head] (matmul parameters; "
    "embedding lookups, layer norms, softmax and the optimizer not counted); the attention "
    "term is forward + backward (3x) of QK^T and AV (2 * seq^2 * width flops each per layer)")


def check_preset(name: str) -> Preset:
  """The preset called `name`, or a one-line ValueError listing the valid ones."""
  if name not in PRESETS:
    raise ValueError(f"unknown preset {name!r}; valid presets: {', '.join(PRESETS)}")
  return PRESETS[name]


def matmul_params(depth: int, width: int, classes: int) -> int:
  """Parameters that take part in matmuls: q,k,v,o (4 w^2) and mlp (8 w^2) per layer, head."""
  return depth * (4 * width ** 2 + 2 * 4 * width ** 2) + width * classes


def flops_per_model_step(depth: int, width: int, seq: int, batch: int, classes: int) -> int:
  """Training FLOPs of one model for one step (see FLOPS_FORMULA)."""
  dense = 6 * matmul_params(depth, width, classes) * batch * seq
  attention = 12 * depth * seq ** 2 * width * batch
  return dense + attention


def grid_specs(p: Preset) -> list[ensemble.ModelSpec]:
  """The 16 models: every pair of seed and learning rate, all at the preset's shape."""
  return [ensemble.ModelSpec(depth=p.depth, width=p.width, heads=p.heads, seed=s, lr=lr)
          for s in SEEDS for lr in LRS]


def _median_time(fn: Callable[[], object], repeats: int) -> float:
  """Median wall time of `repeats` calls of `fn` (which must block on its result)."""
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
  return statistics.median(times)


def matmul_peak_gflops(n: int = 1024, repeats: int = 20) -> float:
  """Median float32 GFLOP/s of a jitted [n, n] @ [n, n] on the default device (2 n^3 flops)."""
  a_NxN = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
  b_NxN = jax.random.normal(jax.random.key(1), (n, n), jnp.float32)
  dot = jax.jit(jnp.dot)
  dot(a_NxN, b_NxN).block_until_ready()
  seconds = _median_time(lambda: dot(a_NxN, b_NxN).block_until_ready(), repeats)
  return 2 * n ** 3 / seconds / 1e9


def _shard_models(tree, devices):
  """Put every leaf's leading models axis across `devices` (a 1-D mesh named 'models')."""
  mesh = Mesh(np.asarray(devices), ("models",))
  return jax.device_put(tree, NamedSharding(mesh, PartitionSpec("models")))


def _setup(task, p: Preset, specs):
  cfg = ensemble.group_config(specs, max_len=p.seq, output_dim=task.output_dim(p.seq),
                              vocab=task.input_vocab)
  total = p.engine_k * (p.engine_calls + 1) + p.sequential_steps + 1
  tcfg = train.TrainConfig(batch_size=p.batch, length=p.seq, total_steps=total)
  return cfg, tcfg


def init_grid(task, p: Preset, specs):
  """(cfg, tcfg, state_M): the grid's group shape, train config and initial state."""
  cfg, tcfg = _setup(task, p, specs)
  return cfg, tcfg, train.init_state(ensemble.init_params(specs, cfg), tcfg)


def bench_engine(task, p: Preset, specs, devices, log) -> dict:
  """All models in one group, `engine_k` steps per dispatch; median over timed dispatches."""
  cfg, tcfg, state_M = init_grid(task, p, specs)
  hp_M, arch_M = train.stack_hparams(specs), ensemble.stack_arch(specs, cfg)
  if len(devices) > 1:
    state_M, hp_M, arch_M = _shard_models((state_M, hp_M, arch_M), devices)
  t0 = time.perf_counter()
  chunk = train.make_train_chunk(task, cfg, tcfg, p.engine_k)
  chunk = chunk.lower(state_M, hp_M, arch_M).compile()
  compile_s = time.perf_counter() - t0
  log(f"engine: compiled in {compile_s:.1f}s; warm-up dispatch of {p.engine_k} steps")
  carry = [chunk(state_M, hp_M, arch_M)[0]]  # the state is donated: keep only the newest
  jax.block_until_ready(carry[0])

  def call():
    carry[0], metrics = chunk(carry[0], hp_M, arch_M)
    jax.block_until_ready(metrics)

  seconds = _median_time(call, p.engine_calls)
  rate = len(specs) * p.engine_k / seconds
  log(f"engine: {rate:.1f} model-steps/s (median of {p.engine_calls} dispatches, {seconds:.3f}s)")
  return {"model_steps_per_s": rate, "compile_s": compile_s, "steps": p.engine_k * p.engine_calls,
          "seconds_per_dispatch": seconds, "steps_per_dispatch": p.engine_k,
          "devices": len(devices),
          "how": "all models vmapped in one jitted lax.scan of steps_per_dispatch steps "
                 "(make_train_chunk); median dispatch time after one warm-up dispatch"}


def bench_sequential(task, p: Preset, specs, log) -> dict:
  """One model at a time: a jitted one-step function called in a Python loop per model."""
  cfg, tcfg, state_M = init_grid(task, p, specs)  # every model has the grid's shape
  step = train.make_train_chunk(task, cfg, tcfg, 1)
  models = [(jax.tree.map(lambda x: x[i:i + 1], state_M), train.stack_hparams([s]),
             ensemble.stack_arch([s], cfg)) for i, s in enumerate(specs)]  # M = 1 groups
  t0 = time.perf_counter()
  step = step.lower(*models[0]).compile()
  compile_s = time.perf_counter() - t0
  log(f"sequential: compiled in {compile_s:.1f}s; warm-up step")
  state, hp, arch = models[0]
  state, metrics = step(state, hp, arch)
  jax.block_until_ready(metrics)
  models[0] = (state, hp, arch)
  per_model = []
  for state, hp, arch in models:
    t0 = time.perf_counter()
    for _ in range(p.sequential_steps):
      state, metrics = step(state, hp, arch)
    jax.block_until_ready((state, metrics))
    per_model.append(time.perf_counter() - t0)
  seconds = statistics.median(per_model)
  rate = p.sequential_steps / seconds
  log(f"sequential: {rate:.1f} model-steps/s (median over {len(specs)} models of "
      f"{p.sequential_steps} steps each, {seconds:.3f}s)")
  return {"model_steps_per_s": rate, "compile_s": compile_s, "steps": p.sequential_steps,
          "total_s": sum(per_model),
          "how": "one M=1 group per model, a jitted one-step make_train_chunk called in a "
                 "Python loop; median over models of the time for `steps` steps"}


def resolve_devices(count: int | None) -> list:
  """The first `count` local devices (all if None); a ValueError if the models don't split."""
  local = jax.local_devices()
  if count is None:
    count = len(local) if NUM_MODELS % len(local) == 0 else 1
  if not 1 <= count <= len(local):
    hint = (f"; to split a CPU into {count} devices set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={count}"
            if local[0].platform == "cpu" and count > len(local) else "")
    raise ValueError(f"--devices must be between 1 and {len(local)} (the local devices), "
                     f"got {count}{hint}")
  if NUM_MODELS % count:
    raise ValueError(f"--devices must divide the {NUM_MODELS} models evenly, got {count}")
  return local[:count]


def run_bench(preset: str, devices: int | None = None, log: Callable[[str], None] = print) -> dict:
  """Engine vs sequential throughput and matmul peak for `preset`, as a JSON-ready dict."""
  start = time.perf_counter()
  p = check_preset(preset)
  devs = resolve_devices(devices)
  task = tasks.make(TASK, **TASK_OPTIONS)
  specs = grid_specs(p)
  classes = task.output_dim(p.seq)
  flops = flops_per_model_step(p.depth, p.width, p.seq, p.batch, classes)
  dev = jax.devices()[0]
  log(f"bench {preset}: {NUM_MODELS} models, width {p.width}, depth {p.depth}, seq {p.seq}, "
      f"batch {p.batch} on {len(devs)} x {dev.device_kind}")
  log("matmul peak: timing jitted float32 1024x1024 @ 1024x1024")
  peak = matmul_peak_gflops()
  log(f"matmul peak: {peak:.1f} GFLOP/s")
  engine = bench_engine(task, p, specs, devs, log)
  sequential = bench_sequential(task, p, specs, log)
  for mode in (engine, sequential):
    mode["gflops"] = mode["model_steps_per_s"] * flops / 1e9
  return {
      "preset": {"name": preset, **dataclasses.asdict(p), "task": TASK, **TASK_OPTIONS,
                 "classes": classes, "models": NUM_MODELS,
                 "grid": {"seeds": list(SEEDS), "lrs": list(LRS),
                          "note": "16 models of one shape, differing in seed and learning rate"}},
      "device": {"kind": dev.device_kind, "platform": dev.platform,
                 "count": jax.device_count(), "used_by_engine": len(devs)},
      "steps": {"engine": engine["steps"], "sequential": sequential["steps"]},
      "flops_per_model_step": flops,
      "flops_formula": FLOPS_FORMULA,
      "matmul_peak_gflops": peak,
      "engine": engine,
      "sequential": sequential,
      "engine_over_sequential": engine["model_steps_per_s"] / sequential["model_steps_per_s"],
      "engine_fraction_of_peak": engine["gflops"] / peak,
      "wall_s": time.perf_counter() - start,
  }
