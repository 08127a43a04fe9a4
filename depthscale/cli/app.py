"""The `depthscale` command line: the argparse tree, main() and its exit codes, and the
tasks / devices / bench handlers (the sweep's are in cli/sweep.py).

Every user error (errors.UserError) ends as one line `depthscale: error: ...` on stderr
and exit status 2; anything else is a bug and keeps its traceback. No training logic;
nothing in the library imports the CLI.
"""
from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from typing import Any, Sequence

from depthscale import bench, bench_mixed, devices, tasks
from depthscale.cli import sweep as sweep_commands
from depthscale.cli.common import UsageError, check_writable, one_line, parse_value, write_json
from depthscale.errors import UserError
from depthscale.sweep.study import reproducible_xla

PROG = "depthscale"
WRAP = 100  # columns before a printed list wraps


class _Parser(argparse.ArgumentParser):
  def error(self, message: str):
    raise UsageError(message)


def parse_task_options(extras: Sequence[str]) -> dict[str, Any]:
  """`--key=value` (or `--key value`) pairs left over by argparse, as task options."""
  options, i = {}, 0
  while i < len(extras):
    arg = extras[i]
    if not arg.startswith("--") or arg == "--":
      raise UsageError(f"unexpected argument {arg!r}; task options look like --key=value")
    key, eq, value = arg[2:].partition("=")
    if not eq:
      if i + 1 >= len(extras) or extras[i + 1].startswith("--"):
        raise UsageError(f"task option --{key} needs a value: write --{key}=VALUE")
      value, i = extras[i + 1], i + 1
    if not key:
      raise UsageError(f"bad task option {arg!r}; write --key=value")
    options[key.replace("-", "_")] = parse_value(value)
    i += 1
  return options


def format_value(value: Any) -> str:
  """Plain rendering: floats to 2 decimals, lists as [a, b], tuples as (a, b)."""
  if isinstance(value, bool) or value is None:
    return str(value)
  if isinstance(value, float):
    return f"{value:.2f}"
  if isinstance(value, list):
    return "[" + ", ".join(format_value(v) for v in value) + "]"
  if isinstance(value, tuple):
    return "(" + ", ".join(format_value(v) for v in value) + ")"
  return str(value)


def format_field(key: str, value: Any, width: int = WRAP) -> str:
  """`key: value`, a long list wrapped between its items with a hanging indent."""
  head = f"{key}: "
  if not isinstance(value, list) or len(head) + len(format_value(value)) <= width:
    return head + format_value(value)
  items = [format_value(v) for v in value]
  indent = " " * (len(head) + 1)
  lines, line = [], head + "[" + items[0]
  for item in items[1:]:
    if len(line) + len(item) + 3 > width:
      lines.append(line + ",")
      line = indent + item
    else:
      line += ", " + item
  return "\n".join(lines + [line + "]"])


def format_example(example: dict[str, Any]) -> str:
  return "\n".join(format_field(k, v) for k, v in example.items())


def cmd_tasks_list(args, extras) -> int:
  width = max(len(name) for name in tasks.REGISTRY)
  for name in sorted(tasks.REGISTRY):
    doc = (tasks.REGISTRY[name].__doc__ or "").strip().splitlines()
    print(f"{name:<{width}}  {doc[0] if doc else ''}")
  return 0


def cmd_tasks_show(args, extras) -> int:
  options = parse_task_options(extras)
  if not 1 <= args.n <= 1000:
    raise UsageError(f"-n must be a number of examples in [1, 1000], got {args.n}")
  if not 0 <= args.seed < 2**32:
    raise UsageError(f"--seed {args.seed}: give a seed in [0, 2^32) (JAX keeps 32 bits)")
  task = tasks.make(args.name, **options)
  length = task.default_length if args.length is None else args.length
  task.check_length(length)  # before any JAX work
  import jax  # deferred: listing and argument errors need no JAX runtime
  batch = task.sample(jax.random.key(args.seed), args.n, length)
  print(f"{task!r}: length {length}, seq_len {task.seq_len(length)}, seed {args.seed}")
  for i in range(args.n):
    print(f"\n# example {i}")
    print(format_example(task.decode(batch, i)))
  return 0


def split_host_into_cores() -> None:
  """Make the CPU platform one JAX device per core (unless XLA_FLAGS already says how
  many): the bench measured the engine 1.6x faster on tiny with the models sharded over
  2 host devices than on one (BUILD_NOTES). Takes effect only before JAX starts its
  backends; accelerators are untouched."""
  flags = os.environ.get("XLA_FLAGS", "")
  if "xla_force_host_platform_device_count" not in flags:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={cores or 1}"


def cmd_bench(args, extras) -> int:
  check_writable(args.json)
  if args.devices is not None and args.devices < 1:
    raise UsageError(f"--devices must be a positive count, got {args.devices}")
  if args.models_per_chunk is not None and args.models_per_chunk < 0:
    raise UsageError(f"--models-per-chunk must be >= 0 (0 = all at once), "
                     f"got {args.models_per_chunk}")
  models = bench.check_models(args.models)
  split_host_into_cores()  # after every check: a refused command changes nothing
  reproducible_xla()  # the settings `run` trains under (float32 matmuls at full precision)
  log = lambda line: print(line, flush=True)
  if args.preset == "mixed":
    result = bench_mixed.run_mixed(args.devices, args.dtype, log)
  else:
    result = bench.run_bench(args.preset, devices=args.devices,
                             models_per_chunk=args.models_per_chunk, dtype=args.dtype,
                             models=models, log=log)
  write_json(args.json, result)
  if args.preset == "mixed":
    print(", ".join(f"{k} {result[k]['model_steps_per_s']:.1f}" for k in ("compact", "pad",
                                                                           "bucket"))
          + f" model-steps/s; compact/pad {result['compact_over_pad']:.2f}, compact/bucket "
          f"{result['compact_over_bucket']:.2f}; wrote {args.json}")
    return 0
  e, s = result["engine"], result["sequential"]
  print(f"engine {e['model_steps_per_s']:.1f} model-steps/s ({e['gflops']:.1f} GFLOP/s), "
        f"sequential {s['model_steps_per_s']:.1f} ({s['gflops']:.1f} GFLOP/s), "
        f"ratio {result['engine_over_sequential']:.2f}, peak {result['matmul_peak_gflops']:.1f} "
        f"GFLOP/s, engine at {100 * result['engine_fraction_of_peak']:.0f}% of peak; "
        f"wrote {args.json}")
  return 0


def format_devices(info: dict) -> list[str]:
  """`depthscale devices` as lines: what JAX sees, the probe, the table's peak."""
  memory = info["memory_bytes_per_device"]
  lines = [f"platform: {info['platform']}", f"kind: {info['kind']}",
           f"count: {info['count']} local device(s), {info['processes']} process(es)",
           f"backend: {info['backend_version']}",
           "memory per device: " + (f"{memory / 2**30:.1f} GiB ({info['memory_note']})"
                                    if memory else info["memory_note"])]
  dtype = info["dtype"]
  if "matmul_peak_gflops" in info:
    lines.append(f"matmul peak, measured ({dtype}, {info['probe_n']}x{info['probe_n']} "
                 f"matrices on device 0): "
                 f"{info['matmul_peak_gflops']:.1f} GFLOP/s")
  table = info["table"]
  if table is None:
    lines.append(f"table: {info['kind']!r} is not in it (known: {', '.join(devices.TABLE)})")
  elif info["table_peak_gflops"] is None:
    lines.append(f"table: {table['name']}, no {dtype} peak")
  else:
    line = f"table: {table['name']}, {dtype} peak {info['table_peak_gflops']:.0f} GFLOP/s"
    if "fraction_of_table_peak" in info:
      line += f"; measured at {100 * info['fraction_of_table_peak']:.0f}% of it"
    lines.append(line)
  return lines


def cmd_devices(args, extras) -> int:
  info = devices.local(args.dtype, probe=not args.no_probe)
  if args.json:
    print(json.dumps(info, indent=2))
  else:
    print("\n".join(format_devices(info)))
  return 0


def build_parser() -> argparse.ArgumentParser:
  """The command tree: tasks, bench, devices here; plan, run, status and report from
  cli/sweep.add_commands."""
  parser = _Parser(prog=PROG, description="Train grids of small transformers at once.",
                   allow_abbrev=False)
  commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                   parser_class=_Parser)

  tasks_parser = commands.add_parser("tasks", help="list the tasks or show samples of one",
                                     allow_abbrev=False)
  task_commands = tasks_parser.add_subparsers(dest="tasks_command", metavar="{list,show}",
                                              required=True, parser_class=_Parser)
  listing = task_commands.add_parser("list", help="task names and one-line descriptions",
                                     allow_abbrev=False)
  listing.set_defaults(handler=cmd_tasks_list)
  show = task_commands.add_parser(
      "show", help="sample and print examples; unknown --key=value pairs are task options",
      allow_abbrev=False)
  show.add_argument("name", help="task name (see `depthscale tasks list`)")
  show.add_argument("-n", type=int, default=3, help="number of examples (default 3)")
  show.add_argument("--length", type=int, default=None,
                    help="the task's size parameter (default: the task's default_length)")
  show.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
  show.set_defaults(handler=cmd_tasks_show, accepts_options=True)

  bench_parser = commands.add_parser(
      "bench", help="engine vs one-model-at-a-time throughput and the matmul peak",
      allow_abbrev=False)
  bench_parser.add_argument("--preset", required=True, choices=list(bench.PRESET_NAMES),
                            help="model and batch shape")
  bench_parser.add_argument("--json", required=True, metavar="FILE",
                            help="where to write the results")
  bench_parser.add_argument("--devices", type=int, default=None,
                            help="local devices to split the models over (default: all, "
                                 "if they divide the 16 models; a CPU is split into one "
                                 "device per core unless XLA_FLAGS sets a count)")
  bench_parser.add_argument("--models-per-chunk", type=int, default=None,
                            help="engine runs the vmapped step on this many models at a time "
                                 "(0 = all; default: the preset's measured best)")
  bench_parser.add_argument("--models", type=int, default=bench.NUM_MODELS,
                            help=f"models in the grid (seeds x {len(bench.LRS)} learning rates; "
                                 f"default {bench.NUM_MODELS}; the GPU target uses 256)")
  bench_parser.add_argument("--dtype", choices=bench.DTYPES, default="float32",
                            help="the models' compute dtype and the peak probe's (parameters "
                                 "stay float32); bfloat16 for the GPU target")
  bench_parser.set_defaults(handler=cmd_bench)

  devices_parser = commands.add_parser(
      "devices", help="what JAX sees here: platform, kind, count, memory, matmul peak",
      allow_abbrev=False)
  devices_parser.add_argument("--dtype", choices=devices.DTYPES, default="float32",
                              help="the matmul probe's dtype (default float32, at the "
                                   "precision runs use; bfloat16 for bf16 runs)")
  devices_parser.add_argument("--no-probe", action="store_true",
                              help="skip the matmul probe (seconds on a CPU)")
  devices_parser.add_argument("--json", action="store_true",
                              help="print one JSON object instead of lines")
  devices_parser.set_defaults(handler=cmd_devices)
  sweep_commands.add_commands(commands)
  return parser


def main(argv: Sequence[str] | None = None) -> int:
  """Run one command; returns (and exits with) 0 on success, 2 on a user error. Only a
  UserError becomes one line; anything else is a bug and keeps its traceback."""
  argv = sys.argv[1:] if argv is None else list(argv)
  try:
    args, extras = build_parser().parse_known_args(argv)
    if extras and not getattr(args, "accepts_options", False):
      raise UsageError(f"unrecognized arguments: {' '.join(extras)}")
    return args.handler(args, extras)
  except UserError as e:  # UsageError, ConfigError, the library's one-line user errors
    print(f"{PROG}: error: {one_line(e)}", file=sys.stderr)
    return 2
  except KeyboardInterrupt:  # before a run's handler is installed (it checkpoints)
    print(f"{PROG}: interrupted (no group was training: nothing to save)", file=sys.stderr)
    return 130
  except OSError as e:  # a full disk anywhere we write: free space, rerun
    if e.errno not in (errno.ENOSPC, errno.EDQUOT):
      raise
    print(f"{PROG}: error: {os.strerror(e.errno)} writing {e.filename or 'a file'}; free "
          "space and rerun the same command (finished work is kept)", file=sys.stderr)
    return 2

