"""The engine against PyTorch on this machine, paired: both sides built and warm in two
processes at once, then timed in turns of a few seconds each, so that a drift in the
machine's speed (1.7x within one cpu_vs_torch.sh run on the 2-core EPYC) lands on both
sides of every pair alike.

  TORCH_PYTHON=~/.torchvenv/bin/python .venv/bin/python tools/bench/torch_paired.py \
      [--preset small] [--pairs 15] [--json OUT.json]

This process builds the engine (all the preset's models, one dispatch of engine_k steps,
as `depthscale bench` does) and the bench's one-model program; a PyTorch process (the
same model, tools/torch_baseline.py: eager, torch.compile and torch.func over the same
models) waits on its stdin. Each pair times every side once: the engine, the one-model
program, and each PyTorch variant, the order reversed every other pair; only one side
runs at a time, the other process blocked on a pipe. Ratios are medians over pairs of
each pair's own ratio: engine / the best PyTorch variant of that pair, and the one-model
step / torch eager. PyTorch is not a dependency of the project (../shared/SPEED.md).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

TORCH_VARIANTS = ("eager", "compile", "func_vmap")
# Each side's turn lasts about a second or more on a 2-core CPU at the small preset: a
# torch one-model turn is torch_baseline.py's 50 steps, the engine's one-model turn 3 of
# the bench's models one after another (its sequential figure), func_vmap as many steps of
# all the models as one engine dispatch has.
TORCH_STEPS, ONE_MODEL_RUNS = 50, 3


def torch_worker(preset: str, models: int, steps: int, vmap_steps: int) -> None:
  """The PyTorch side: build and warm each variant, print `ready`, then answer each line
  `VARIANT` with the seconds of one timed chunk (`steps` steps of one model, or
  `vmap_steps` steps of all `models`), until `quit`."""
  import torch
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  import torch_baseline as tb  # tools/, this script's parent directory
  cfg = tb.PRESETS[preset]
  D, L, T, B = cfg["D"], cfg["L"], cfg["T"], cfg["B"]
  gen = torch.Generator().manual_seed(0)

  def one_model(compiled: bool):
    torch.manual_seed(0)
    model = tb.Decoder(D, L, T)
    opt = torch.optim.Adam(model.parameters(), lr=tb.LR)
    fwd = torch.compile(model) if compiled else model

    def step():
      x, y = tb.batch(B, T, gen)
      loss = tb.loss_fn(fwd(x).float(), y)
      opt.zero_grad(set_to_none=True)
      loss.backward()
      opt.step()
    return step

  def stacked():
    from torch.func import functional_call, grad_and_value, stack_module_state, vmap
    import copy
    ms = [tb.Decoder(D, L, T, attn_impl="manual") for _ in range(models)]  # as torch_baseline:
    # SDPA has no vmap batching rule on a CPU (a slow fallback loop)
    params, buffers = stack_module_state(ms)
    params = {k: v.detach() for k, v in params.items()}
    base = copy.deepcopy(ms[0]).to("meta")
    gstep = vmap(grad_and_value(lambda p, b, x, y: tb.loss_fn(
        functional_call(base, (p, b), (x,)).float(), y)), randomness="error")
    opt = torch.optim.Adam(list(params.values()), lr=tb.LR)

    def step():
      x, y = tb.batch(B, T, gen, lead=(models,))
      grads, _ = gstep(params, buffers, x, y)
      for k, p in params.items():
        p.grad = grads[k]
      opt.step()
    return step

  runs = {"eager": (one_model(False), steps), "compile": (one_model(True), steps),
          "func_vmap": (stacked(), vmap_steps)}
  for step, _ in runs.values():
    for _ in range(3):
      step()
  print(f"ready {torch.__version__} {torch.get_num_threads()}", flush=True)
  for line in sys.stdin:
    if line.strip() == "quit":
      return
    step, n = runs[line.strip()]
    t0 = time.perf_counter()
    for _ in range(n):
      step()
    print(time.perf_counter() - t0, flush=True)


def engine_side(preset: str):
  """This process's sides as the bench builds them: (engine seconds, engine model-steps a
  dispatch, one-model seconds for model i, its steps, the preset's model count)."""
  from depthscale.cli.app import split_host_into_cores
  from depthscale.sweep.study import reproducible_xla
  split_host_into_cores()
  reproducible_xla()
  import jax
  from depthscale import tasks
  from depthscale.bench import shapes
  from depthscale.bench.programs import make_engine, make_sequential
  p = shapes.PRESETS[preset]
  task = tasks.make(shapes.TASK, **shapes.TASK_OPTIONS)
  devs = shapes.resolve_devices(None, p.models)
  p = shapes.on_platform(p, devs[0].platform)
  specs = shapes.grid_specs(p, p.models)
  log = lambda s: print(f"engine {s}", flush=True)
  engine, _ = make_engine(task, p, specs, devs, log, p.chunk_on(devs[0].platform), p.dtype)
  sequential, _ = make_sequential(task, p, specs, log, p.dtype)
  return engine, len(specs) * p.engine_k, sequential, p.sequential_steps, len(specs)


def pairs(args) -> dict:
  engine, engine_steps, sequential, seq_steps, n = engine_side(args.preset)
  torch_python = os.environ.get("TORCH_PYTHON", os.path.expanduser("~/.torchvenv/bin/python"))
  worker = subprocess.Popen(
      [torch_python, __file__, "--torch-worker", "--preset", args.preset, "--models", str(n),
       "--steps", str(TORCH_STEPS), "--vmap-steps", str(engine_steps // n)],
      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  ready = worker.stdout.readline().split()
  if not ready or ready[0] != "ready":
    sys.exit(f"torch_paired: the PyTorch process ({torch_python}) did not start")

  def torch_side(variant: str) -> float:
    worker.stdin.write(variant + "\n")
    worker.stdin.flush()
    return float(worker.stdout.readline())

  steps = {"engine": engine_steps, "one model": ONE_MODEL_RUNS * seq_steps,
           "eager": TORCH_STEPS, "compile": TORCH_STEPS, "func_vmap": engine_steps}
  sides = {"engine": engine,
           "one model": lambda i: sequential([(i + j) % n for j in range(ONE_MODEL_RUNS)]),
           **{v: (lambda v=v: torch_side(v)) for v in TORCH_VARIANTS}}
  order = list(steps)
  rows = []
  try:
    for i in range(args.pairs):
      row = {}
      for side in order if i % 2 == 0 else order[::-1]:
        t = sides[side](i) if side == "one model" else sides[side]()
        row[side] = steps[side] / t
      rows.append(row)
      print(f"pair {i + 1}/{args.pairs}: " + ", ".join(f"{k} {v:.1f}" for k, v in row.items()),
            flush=True)
  finally:
    worker.stdin.write("quit\n")
    worker.stdin.close()
    worker.wait()
  return dict(summarise(rows), preset=args.preset, models=n,
              torch={"version": ready[1], "threads": int(ready[2])})


def summarise(rows: list[dict]) -> dict:
  """Medians of each side's model-steps/s and of each pair's own ratios."""
  med = lambda f: statistics.median(f(r) for r in rows)
  best = lambda r: max(r[v] for v in TORCH_VARIANTS)
  return {
      "pairs": len(rows),
      "model_steps_per_s": {k: med(lambda r: r[k]) for k in rows[0]},
      "engine_over_best_torch": med(lambda r: r["engine"] / best(r)),
      "engine_over_best_torch_range": [min(r["engine"] / best(r) for r in rows),
                                       max(r["engine"] / best(r) for r in rows)],
      "engine_over": {v: med(lambda r: r["engine"] / r[v]) for v in TORCH_VARIANTS},
      "sequential_over_eager": med(lambda r: r["one model"] / r["eager"]),
      "how": "medians over pairs of each pair's own ratio; in each pair every side timed "
             "once, one at a time, the order reversed every other pair",
      "rows": rows}


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--preset", default="small")
  ap.add_argument("--pairs", type=int, default=15)
  ap.add_argument("--json")
  ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
  ap.add_argument("--models", type=int, default=16, help=argparse.SUPPRESS)
  ap.add_argument("--steps", type=int, default=TORCH_STEPS, help=argparse.SUPPRESS)
  ap.add_argument("--vmap-steps", type=int, default=10, help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.torch_worker:
    torch_worker(args.preset, args.models, args.steps, args.vmap_steps)
    return 0
  if args.pairs < 1:
    sys.exit(f"torch_paired: --pairs must be 1 or more, not {args.pairs}")
  out = pairs(args)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(out, f, indent=2)
  print(f"engine / best torch {out['engine_over_best_torch']:.2f} (pairs "
        f"{out['engine_over_best_torch_range'][0]:.2f}-{out['engine_over_best_torch_range'][1]:.2f}"
        f"); one-model / eager {out['sequential_over_eager']:.2f}; model-steps/s "
        + ", ".join(f"{k} {v:.1f}" for k, v in out["model_steps_per_s"].items()))
  return 0


if __name__ == "__main__":
  sys.exit(main())
