"""The one-model step's changes of issue 48 on this machine, one at a time, in one run:
the written-out LayerNorm and attention backward passes against JAX's autodiff of the same
formulas (the code before them), at a bench preset's shape.

  python tools/bench/step_ablation.py [--preset small] [--rounds 3]
  python tools/bench/step_ablation.py --paired "sums as reductions" [--pairs 12]

Each round runs every variant in a fresh process (compile, warm up, then time the engine's
dispatches of all the preset's models, and a one-model program's steps), variants in turn,
so that each round compares like with like on a shared machine (the order reversed every
other round, so that a drift in the machine's speed favours none); it prints each
variant's median and its median ratio to `autodiff both` (the code before). A CPU's figures only:
on a GPU the same script measures that device (nothing here is CPU-specific).

--paired V builds the engine as is and with variant V in one process (the variant is
applied at trace time) and alternates their dispatches (A B, then B A), which a noisy
machine's drift cannot favour: it prints each one's median and the median of the pairs'
ratios (as is / V: what the change bought). "sums as reductions" is model/sums.py's
accelerator path (reductions) on this machine; "chunks at every step" the pad layout's
chunks taken in turn at each step (before core/chunks.by_chunk).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

VARIANTS = ("as is", "autodiff LayerNorm", "autodiff attention", "autodiff both")
PAIRED_ONLY = ("sums as reductions", "chunks at every step")


def _patch(variant: str) -> None:
  """Put back JAX's autodiff of the plain formulas where the variant says."""
  import jax
  import jax.numpy as jnp
  from depthscale.model import attention, layer_norm
  if variant in ("autodiff LayerNorm", "autodiff both"):
    def norm(x, scale, bias, mask, eps):
      n, m = jnp.sum(mask), mask[None]
      mean = jnp.sum(x * m, -1, keepdims=True) / n
      c = (x - mean) * m
      var = jnp.sum(c * c, -1, keepdims=True) / n
      return c * jax.lax.rsqrt(var + eps) * scale[None] + bias[None] * m
    layer_norm._norm = norm
  if variant == "chunks at every step":  # the pad layout's loops as before core/chunks.py
    from depthscale.core import chunks, lengths, program, train
    group_step = program.group_step

    def every_step(task, cfg, tcfg, devices=None):
      if tcfg.layout != "pad":
        return group_step(task, cfg, tcfg, devices)
      return lengths.at_bucket(task, tcfg, lambda t: chunks.map_models(
          jax.vmap(train.make_step(task, cfg, tcfg, t)), tcfg.models_per_chunk))
    program.group_step, program.by_chunk = every_step, lambda loop_M, tcfg: loop_M
  if variant == "sums as reductions":
    from depthscale.model import sums
    sums.as_dots = lambda platform=None: False
  if variant in ("autodiff attention", "autodiff both"):
    attention._einsum_attention = lambda q, k, v, scale: attention._attention_fwd(
        q, k, v, scale)[0]


def measure(variant: str, preset: str) -> dict:
  """In this process: the engine's and a one-model program's model-steps/s."""
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                             + " --xla_force_host_platform_device_count=2")
  import time
  import jax
  import numpy as np
  jax.config.update("jax_default_matmul_precision", "highest")
  _patch(variant)
  from depthscale import tasks
  from depthscale.bench import shapes
  from depthscale.bench.programs import make_engine, train_config
  from depthscale.core import program
  p = shapes.PRESETS[preset]
  task = tasks.make(shapes.TASK, **shapes.TASK_OPTIONS)
  specs = shapes.grid_specs(p, p.models)
  devs = jax.local_devices()
  dispatch, _ = make_engine(task, p, specs, devs, lambda s: None, p.chunk_on(devs[0].platform))
  engine = len(specs) * p.engine_k / statistics.median(dispatch() for _ in range(5))
  bp = program.Blueprint.of(task, specs[:1], train_config(p), {}, 1)
  prog = program.build(bp, devs[:1])
  state, one = prog.state, np.int32(1)
  state, m = prog.run(state, prog.hp, prog.arch, one)
  jax.block_until_ready(m)
  times = []
  for _ in range(5):
    t0 = time.perf_counter()
    for _ in range(p.sequential_steps):
      state, m = prog.run(state, prog.hp, prog.arch, one)
    jax.block_until_ready((state, m))
    times.append((time.perf_counter() - t0) / p.sequential_steps)
  return {"engine": engine, "one_model": 1 / statistics.median(times)}


def paired(variant: str, preset: str, pairs: int) -> dict:
  """In this process: the engine as is and with `variant`, dispatches alternated."""
  import dataclasses
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                             + " --xla_force_host_platform_device_count=2")
  import jax
  jax.config.update("jax_default_matmul_precision", "highest")
  from depthscale import tasks
  from depthscale.bench import shapes
  from depthscale.bench.programs import train_config, warmed_dispatch
  from depthscale.core import program
  p = shapes.PRESETS[preset]
  task = tasks.make(shapes.TASK, **shapes.TASK_OPTIONS)
  specs, devs = shapes.grid_specs(p, p.models), jax.local_devices()

  def engine(extra: int):  # another total_steps: a program of its own, traced again
    tcfg = train_config(p, p.chunk_on(devs[0].platform))
    tcfg = dataclasses.replace(tcfg, total_steps=tcfg.total_steps + extra)
    prog = program.build(program.Blueprint.of(task, specs, tcfg, {}, p.engine_k), devs)
    dispatch = warmed_dispatch(prog, p.engine_k)
    dispatch()
    return dispatch
  as_is = engine(0)
  _patch(variant)
  other = engine(1)
  n, a, b = len(specs) * p.engine_k, [], []
  for i in range(pairs):
    first, second = (as_is, other) if i % 2 == 0 else (other, as_is)
    t1, t2 = first(), second()
    a.append(t1 if i % 2 == 0 else t2)
    b.append(t2 if i % 2 == 0 else t1)
  ratios = [y / x for x, y in zip(a, b)]
  return {"as is": n / statistics.median(a), variant: n / statistics.median(b),
          "as is / variant": statistics.median(ratios),
          "range": [min(ratios), max(ratios)]}


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--preset", default="small")
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--variant", help=argparse.SUPPRESS)  # a child process's own variant
  ap.add_argument("--paired", choices=VARIANTS[1:] + PAIRED_ONLY,
                  help="as is against this variant in one process, dispatches alternated")
  ap.add_argument("--pairs", type=int, default=12)
  args = ap.parse_args()
  if args.paired:
    print(json.dumps(paired(args.paired, args.preset, args.pairs)))
    return 0
  if args.variant:
    print(json.dumps(measure(args.variant, args.preset)))
    return 0
  rows = {v: [] for v in VARIANTS}
  for r in range(args.rounds):
    for v in VARIANTS if r % 2 == 0 else VARIANTS[::-1]:
      out = subprocess.run([sys.executable, __file__, "--preset", args.preset, "--variant", v],
                           capture_output=True, text=True, check=True).stdout
      rows[v].append(json.loads(out.strip().splitlines()[-1]))
      print(f"round {r + 1}: {v}: {rows[v][-1]}", flush=True)
  base = rows["autodiff both"]
  print(f"\n| variant ({args.preset}) | engine model-steps/s | vs before | one model | vs before |")
  print("|---|---|---|---|---|")
  for v in VARIANTS:
    med = {k: statistics.median(x[k] for x in rows[v]) for k in ("engine", "one_model")}
    ratio = {k: statistics.median(x[k] / b[k] for x, b in zip(rows[v], base))
             for k in ("engine", "one_model")}
    print(f"| {v} | {med['engine']:.1f} | {ratio['engine']:.2f} | {med['one_model']:.1f} | "
          f"{ratio['one_model']:.2f} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
