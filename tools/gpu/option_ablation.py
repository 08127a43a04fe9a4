"""The one model's options (attention kernel, remat, unrolling, the GELU's backward)
against each other on this device, in one process: issue 48's ablation of the GPU
defaults at a bench preset's shape (and issue 60's gelu=recompute against xla).

  python tools/gpu/option_ablation.py [--preset paper] [--rounds 5] [--json OUT.json]
      [--variant "name=option:value,option:value" ...] [--depth N] [--dtype float32]

Every variant's engine (all the preset's models in one program, engine_k steps a dispatch,
the preset's compute dtype) is built and warmed up first; then each round times one
dispatch of each, the order rotated every round, so that a drift in the device's speed
favours none, and probes the matmul peak in the compute dtype. Prints and writes each
variant's median model-steps/s, its median ratio to `defaults` (the options left at auto:
what a study that says nothing gets), TFLOP/s and fraction of the peak measured in the
same rounds, compile seconds and compiled memory. On a CPU the paper preset runs at the
size bench names (shapes.on_platform), which makes this script's own test quick.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

DEFAULT_VARIANTS = ("defaults=", "remat block=remat:block", "remat none=remat:none",
                    "dot_product=attention:dot_product", "cudnn=attention:cudnn",
                    "einsum=attention:einsum", "rolled=unroll:none",
                    "remat none + dot_product=remat:none,attention:dot_product",
                    "gelu recompute=gelu:recompute")


def parse_variant(text: str) -> tuple[str, dict]:
  """'name=option:value,option:value' -> (name, {option: value}); one clear line if not."""
  name, sep, spec = text.partition("=")
  if not sep or not name.strip():
    raise SystemExit(f"--variant must be NAME=OPTION:VALUE[,OPTION:VALUE], got {text!r}")
  from depthscale.model import transformer
  valid = {"attention": transformer.ATTENTIONS, "remat": transformer.REMATS,
           "unroll": transformer.UNROLLS, "gelu": transformer.GELUS}
  options = {}
  for item in filter(None, (s.strip() for s in spec.split(","))):
    key, sep, value = item.partition(":")
    if not sep or value not in valid.get(key, ()):
      raise SystemExit(f"--variant {name}: each option must be one of "
                       + "; ".join(f"{k}:{'|'.join(v)}" for k, v in valid.items())
                       + f", got {item!r}")
    options[key] = value
  return name.strip(), options


def ablate(preset: str, rounds: int, variants: list[tuple[str, dict]], log=print,
           depth: int | None = None, dtype: str | None = None) -> dict:
  import dataclasses
  import jax
  from depthscale import devices as devices_lib
  from depthscale import tasks
  from depthscale.bench import shapes
  from depthscale.bench.engine import flops_per_model_step
  from depthscale.bench.programs import engine_program, warmed_dispatch
  from depthscale.model.attention import attention_impl, deterministic_gpu_ops
  from depthscale.model.transformer import remat_policy, unroll_layers
  devs = jax.local_devices()
  p = shapes.on_platform(shapes.PRESETS[preset], devs[0].platform)
  p = dataclasses.replace(p, depth=depth or p.depth, dtype=dtype or p.dtype)
  n = p.models
  devs = shapes.resolve_devices(None, n)
  task = tasks.make(shapes.TASK, **shapes.TASK_OPTIONS)
  specs = shapes.grid_specs(p, n)
  flops = flops_per_model_step(p.depth, p.width, p.seq, p.batch, task.output_dim(p.seq))
  built, failed = {}, {}
  for name, options in variants:
    resolved = {"attention": attention_impl(options.get("attention", "auto"), p.dtype,
                                            p.width // p.heads),
                "remat": remat_policy(options.get("remat", "auto")),
                "unroll": "full" if unroll_layers(options.get("unroll", "auto"), p.depth,
                                                   options.get("remat", "auto")) else "none",
                "gelu": options.get("gelu", "xla")}
    t0 = time.perf_counter()
    try:  # a kernel the device cannot run is a finding of its own (cuDNN under determinism)
      prog = engine_program(task, p, specs, devs, p.chunk_on(devs[0].platform), p.dtype,
                            options=options)
      dispatch = warmed_dispatch(prog, p.engine_k)
    except Exception as e:  # noqa: BLE001  reported, not hidden: the row says why
      failed[name] = {"options": options, "resolved": resolved,
                      "error": f"{type(e).__name__}: {str(e)[:300]}"}
      log(f"{name}: {resolved} FAILED: {failed[name]['error']}")
      continue
    log(f"{name}: {resolved}, compiled and warmed in {time.perf_counter() - t0:.1f} s, "
        f"memory {prog.memory_bytes / 2**30:.2f} GiB")
    built[name] = (dispatch, resolved, time.perf_counter() - t0, prog.memory_bytes)
  names = [name for name, _ in variants if name in built]
  if not names:
    raise RuntimeError(f"every variant failed: {failed}")
  times = {name: [] for name in names}
  peaks = []
  peak_n = devices_lib.probe_size(devs[0].platform)
  for r in range(rounds):
    shift = r % len(names)
    for name in names[shift:] + names[:shift]:
      times[name].append(built[name][0]())
    peaks.append(devices_lib.matmul_peak_gflops(p.dtype, n=peak_n, device=devs[0]))
    log(f"round {r + 1}: " + ", ".join(f"{x} {n * p.engine_k / times[x][-1]:.1f}"
                                      for x in names) + f" model-steps/s; peak {peaks[-1]:.0f}")
  base = names[0]
  peak = statistics.median(peaks)
  rows = {}
  for name in names:
    rate = n * p.engine_k / statistics.median(times[name])
    rows[name] = {
        "options": dict(variants)[name], "resolved": built[name][1],
        "model_steps_per_s": rate,
        "vs_first": statistics.median(a / b for a, b in zip(times[base], times[name])),
        "tflops": rate * flops / 1e12, "fraction_of_peak": rate * flops / 1e9 / peak,
        "build_s": built[name][2], "memory_gib": built[name][3] / 2**30}
  return {"preset": preset, "shape": {"models": n, "width": p.width, "depth": p.depth,
                                      "seq": p.seq, "batch": p.batch, "heads": p.heads,
                                      "dtype": p.dtype, "engine_k": p.engine_k},
          "device": devs[0].device_kind, "devices": len(devs), "rounds": rounds,
          "matmul_peak_gflops": peak, "first": base, "variants": rows, "failed": failed,
          "deterministic_gpu_ops": deterministic_gpu_ops(),
          "how": "medians over rounds; vs_first: the median of each round's time ratio "
                 "(first / variant: above 1 is faster than the first variant)"}


def table(result: dict) -> str:
  lines = [f"| variant ({result['preset']}, {result['device']}) | resolved | model-steps/s "
           f"| vs {result['first']} | TFLOP/s | of peak | build s | memory GiB |",
           "|---|---|---|---|---|---|---|---|"]
  for name, row in result["variants"].items():
    res = ", ".join(f"{k} {v}" for k, v in row["resolved"].items())
    lines.append(f"| {name} | {res} | {row['model_steps_per_s']:.1f} | {row['vs_first']:.2f} | "
                 f"{row['tflops']:.1f} | {row['fraction_of_peak']:.1%} | {row['build_s']:.1f} "
                 f"| {row['memory_gib']:.2f} |")
  for name, row in result["failed"].items():
    res = ", ".join(f"{k} {v}" for k, v in row["resolved"].items())
    lines.append(f"| {name} | {res} | failed: {row['error'][:80]} | | | | | |")
  return "\n".join(lines)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--preset", default="paper")
  ap.add_argument("--rounds", type=int, default=5)
  ap.add_argument("--variant", action="append",
                  help="NAME=OPTION:VALUE[,...] (repeatable; the first is the reference; "
                       "default: the options left at auto, then each changed alone)")
  ap.add_argument("--json", help="where to write the result")
  ap.add_argument("--depth", type=int, help="the preset's shape at this depth instead")
  ap.add_argument("--dtype", choices=("float32", "bfloat16"),
                  help="the models' compute dtype instead of the preset's")
  ap.add_argument("--no-deterministic", action="store_true",
                  help="leave out `depthscale run`'s deterministic GPU ops (XLA_FLAGS)")
  args = ap.parse_args(argv)
  from depthscale.bench import shapes
  if args.preset not in shapes.PRESETS:
    raise SystemExit(f"--preset must be one of {', '.join(shapes.PRESETS)}, got {args.preset!r}")
  if args.rounds < 1:
    raise SystemExit(f"--rounds must be at least 1, got {args.rounds}")
  variants = [parse_variant(v) for v in args.variant or DEFAULT_VARIANTS]
  if len({name for name, _ in variants}) != len(variants):
    raise SystemExit("--variant names must differ")
  if not args.no_deterministic:  # as `depthscale run` and `bench`, before JAX starts
    from depthscale.sweep.study import reproducible_xla
    reproducible_xla()
  if args.depth is not None and args.depth < 1:
    raise SystemExit(f"--depth must be at least 1, got {args.depth}")
  result = ablate(args.preset, args.rounds, variants, log=lambda s: print(s, flush=True),
                  depth=args.depth, dtype=args.dtype)
  print(table(result))
  if args.json:
    with open(args.json, "w") as f:
      json.dump(result, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
