"""The `depthscale` command line: the argparse tree, main() and its exit codes, and the
devices / bench handlers (the sweep's are in cli/sweep.py, the tasks' in cli/tasks_cmd.py).

Every user error (errors.UserError) ends as one line `depthscale: error: ...` on stderr
and exit status 2; anything else is a bug and keeps its traceback. No training logic;
nothing in the library imports the CLI.
"""
from __future__ import annotations

import argparse
import errno
import gc
import json
import os
import sys
from typing import Sequence

from depthscale import bench, devices
from depthscale.bench import shapes as bench_shapes
from depthscale.cli import sweep as sweep_commands
from depthscale.cli import tasks_cmd as tasks_commands
from depthscale.cli.common import Parser, UsageError, check_writable, one_line, write_json
from depthscale.errors import UserError
from depthscale.sweep.study import COUNT_FLAG, reproducible_xla

PROG = "depthscale"
# Python's cyclic garbage collector, run less often in a depthscale process: a command
# traces and compiles programs whose many objects each collection walks (a 60-step smoke
# run spent 0.68 s of 8.7 in it at Python's defaults, 700, 10, 10; BUILD_NOTES, Test suite).
GC_THRESHOLDS = (50_000, 20, 100)


def split_host_into_cores() -> None:
  """Make the CPU platform one JAX device per core (unless XLA_FLAGS already says how
  many): the bench measured the engine 1.6x faster on tiny with the models sharded over
  2 host devices than on one (BUILD_NOTES). Takes effect only before JAX starts its
  backends; accelerators are untouched."""
  flags = os.environ.get("XLA_FLAGS", "")
  if COUNT_FLAG not in flags:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    os.environ["XLA_FLAGS"] = f"{flags} {COUNT_FLAG}={cores or 1}"


def cmd_bench(args, extras) -> int:
  check_writable(args.json)
  if args.devices is not None and args.devices < 1:
    raise UsageError(f"--devices must be a positive count, got {args.devices}")
  if args.models_per_chunk is not None and args.models_per_chunk < 0:
    raise UsageError(f"--models-per-chunk must be >= 0 (0 = all at once), "
                     f"got {args.models_per_chunk}")
  preset = bench.get(args.preset)
  unused = [f"--{k.replace('_', '-')}" for k in ("devices", "models_per_chunk", "dtype", "models")
            if getattr(args, k) is not None and k not in preset.uses]
  if unused:
    raise UsageError(f"--preset {preset.name} does not use {', '.join(unused)} (it uses "
                     f"{', '.join('--' + k.replace('_', '-') for k in preset.uses) or 'none'});"
                     " drop it")
  if args.models is not None:  # a multiple of the preset's learning rates: checked by it
    bench_shapes.check_models(args.models, lrs=(None,))
  options = bench.Options(devices=args.devices, models_per_chunk=args.models_per_chunk,
                          dtype=args.dtype, models=args.models)
  if not preset.through_runner:
    split_host_into_cores()  # after every check: a refused command changes nothing
    reproducible_xla()  # the settings `run` trains under (float32 matmuls at full precision)
  result = preset.run(options, lambda line: print(line, flush=True))
  write_json(args.json, result)
  print(f"{preset.summary(result)}; wrote {args.json}")
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


def version() -> str:
  """The package's version: setup.cfg's where the package runs from its source tree (an
  editable install's metadata is only as new as the last install), else the installed
  metadata's."""
  import configparser
  import importlib.metadata
  cfg = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
      __file__)))), "setup.cfg")
  parser = configparser.ConfigParser()
  if parser.read(cfg) and parser.get("metadata", "name", fallback=None) == PROG:
    return parser.get("metadata", "version")
  try:
    return importlib.metadata.version(PROG)
  except importlib.metadata.PackageNotFoundError:
    return "unknown"


def build_parser() -> argparse.ArgumentParser:
  """The command tree: bench and devices here; tasks from cli/tasks_cmd.add_commands; plan,
  run, status and report from cli/sweep.add_commands."""
  parser = Parser(prog=PROG, description="Train grids of small transformers at once.",
                   allow_abbrev=False)
  parser.add_argument("--version", action="version", version=f"{PROG} {version()}")
  commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                   parser_class=Parser)

  tasks_commands.add_commands(commands)

  bench_parser = commands.add_parser(
      "bench", help="engine vs one-model-at-a-time throughput and the matmul peak",
      allow_abbrev=False)
  bench_parser.add_argument("--preset", required=True, choices=list(bench.names()),
                            help="model and batch shape")
  bench_parser.add_argument("--json", required=True, metavar="FILE",
                            help="where to write the results")
  bench_parser.add_argument("--devices", type=int, default=None,
                            help="local devices to split the models over (default: all, "
                                 "if they divide the 16 models; a CPU is split into one "
                                 "device per core unless XLA_FLAGS sets a count)")
  bench_parser.add_argument("--models-per-chunk", type=int, default=None,
                            help="engine runs the vmapped step on this many models at a time "
                                 "(0 = all; default: the preset's CPU best on a CPU, all elsewhere)")
  bench_parser.add_argument("--models", type=int, default=None,
                            help=f"models in the grid (seeds x the preset's learning rates: "
                                 f"{len(bench_shapes.LRS)}, paper 1; default "
                                 f"{bench_shapes.NUM_MODELS}, paper 3; the GPU target uses 256)")
  bench_parser.add_argument("--dtype", choices=bench_shapes.DTYPES, default=None,
                            help="the models' compute dtype and the peak probe's (parameters "
                                 "stay float32); default float32, paper bfloat16")
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


def exit_now(code: int) -> None:
  """End the process with `code` without Python's exit, which can crash (a segfault)
  after a KeyboardInterrupt has cut an import or XLA's work short; nothing is in flight
  then (no group trains), so nothing is lost."""
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
  """Run one command; returns (and exits with) 0 on success, 2 on a user error. Only a
  UserError becomes one line; anything else is a bug and keeps its traceback."""
  program = argv is None  # the `depthscale` process itself, not a caller in Python
  argv = sys.argv[1:] if argv is None else list(argv)
  gc.set_threshold(*GC_THRESHOLDS)
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
    if program:  # an import or a compile cut short can crash Python's exit (a segfault)
      exit_now(130)
    return 130
  except OSError as e:  # a full disk anywhere we write: free space, rerun
    if e.errno not in (errno.ENOSPC, errno.EDQUOT):
      raise
    print(f"{PROG}: error: {os.strerror(e.errno)} writing {e.filename or 'a file'}; free "
          "space and rerun the same command (finished work is kept)", file=sys.stderr)
    return 2

