"""The sweep subcommands of the CLI: `plan`, `run`, `report`.

Each handler loads and validates the config (one-line errors before any compilation)
and calls the library; cli.py registers them with `add_commands`.
"""
from __future__ import annotations


import json
import os

from depthscale import config as config_lib
from depthscale.errors import UserError


def _load(args, extras):
  overrides = []
  for e in extras:
    if not e.startswith("--config."):
      raise UserError(f"unrecognized argument {e!r}; overrides look like --config.a.b=v")
    overrides.append(e[len("--config."):])
  return config_lib.load(args.config, overrides)


def cmd_plan(args, extras) -> int:
  from depthscale.sweep import plan, runner
  c = _load(args, extras)
  task, groups = runner.planned(c)
  t = c.train
  out_dim = task.output_dim(max(c.grid.length))
  total_p = total_u = total_s = 0.0
  print(f"{c.name}: {sum(len(g.cells) for g in groups)} models in {len(groups)} groups "
        f"(strategy {c.plan.strategy}), {t.steps} steps each, batch {t.batch_size}")
  print(f"{'group':28s} {'models':>6s} {'padded shape (d,w,r)':>20s} {'useful/padded':>13s} "
        f"{'GFLOP':>10s} {'memory':>9s} {'est. time':>10s}")
  for g in groups:
    seq = task.seq_len(g.length)
    padded, useful = plan.group_cost(g, seq, t.batch_size, t.steps, c.model.mlp_ratio, out_dim)
    mem = plan.memory_bytes(g, seq, t.batch_size, c.model.mlp_ratio, task.input_vocab or 0,
                            out_dim)
    secs = padded / (c.plan.gflops * 1e9) + c.plan.compile_s
    total_p, total_u, total_s = total_p + padded, total_u + useful, total_s + secs
    print(f"{g.id:28s} {len(g.cells):6d} {str(g.padded_shape()):>20s} "
          f"{useful / padded:13.0%} {padded / 1e9:10.3g} {mem / 2**20:7.0f}MB "
          f"{secs / 3600:9.2f}h")
  print(f"total: {total_p / 1e9:.3g} GFLOP padded, {total_u / 1e9:.3g} useful "
        f"({total_u / total_p:.0%}); est. {total_s / 3600:.2f} h at {c.plan.gflops:g} GFLOP/s "
        f"(config.plan.gflops) + {c.plan.compile_s:g} s compile per group")
  return 0


def parse_devices(text: str | None) -> list[int] | None:
  """`--devices 0,1` -> [0, 1] (checked before JAX starts)."""
  if text is None:
    return None
  try:
    ids = [int(t) for t in text.split(",")]
  except ValueError:
    ids = []
  if not ids or min(ids) < 0 or len(set(ids)) != len(ids):
    raise UserError(f"--devices {text!r}: give distinct device indices, e.g. --devices 0,1")
  if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
    raise UserError("--devices and CUDA_VISIBLE_DEVICES both choose devices; use one")
  return ids


def select_devices(ids):
  """The local devices a worker trains on. On a GPU host --devices is applied as
  CUDA_VISIBLE_DEVICES before JAX starts (so the worker touches no other GPU); on CPU
  or TPU the listed local devices are used."""
  import jax
  if ids is None or jax.default_backend() == "gpu":
    return None
  local = jax.local_devices()
  if max(ids) >= len(local):
    raise UserError(f"--devices {','.join(map(str, ids))}: this host has {len(local)} "
                    f"{local[0].platform} devices (0..{len(local) - 1})")
  return [local[i] for i in ids]


def worker_jax(args) -> None:
  """Multi-process JAX only when asked for: a TPU pod slice, whose hosts must start JAX
  together. Independent workers never call it (they share no fate)."""
  import jax
  if args.num_processes > 1:
    jax.distributed.initialize(coordinator_address=args.coordinator,
                               num_processes=args.num_processes, process_id=args.process_id)


def check_worker_flags(args) -> None:
  if args.num_processes < 1:
    raise UserError(f"--num-processes {args.num_processes}: give a count >= 1")
  if args.num_processes > 1 and (not args.coordinator or
                                 not 0 <= args.process_id < args.num_processes):
    raise UserError("--num-processes > 1 needs --coordinator HOST:PORT and "
                    "0 <= --process-id < --num-processes")
  if args.num_processes == 1 and (args.coordinator or args.process_id):
    raise UserError("--coordinator and --process-id need --num-processes > 1 (a TPU pod "
                    "slice); independent workers need neither")


def cmd_run(args, extras) -> int:
  from depthscale.sweep import runner
  c = _load(args, extras)
  ids = parse_devices(args.devices)
  check_worker_flags(args)
  runner.planned(c)  # validate before starting anything
  runner.check_workdir(args.workdir)
  if ids is not None:
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, ids))  # before JAX starts
  runner.reproducible_xla()  # before JAX starts its backends (XLA_FLAGS)
  worker_jax(args)
  runner.run(c, args.workdir, progress=not args.no_progress, devices=select_devices(ids),
             exit_when_idle=args.exit_when_idle)
  return 0


def cmd_status(args, extras) -> int:
  from depthscale.sweep import status
  if extras:
    raise UserError(f"unrecognized arguments: {' '.join(extras)}")
  report = status.status(args.workdir)
  if args.json:
    print(json.dumps(report, indent=2))
  else:
    print(status.format_status(report))
  return 0


def cmd_report(args, extras) -> int:
  import os
  from depthscale.report import build_report
  if extras:
    raise UserError(f"unrecognized arguments: {' '.join(extras)}")
  if not os.path.isdir(args.workdir):
    raise UserError(f"no such workdir {args.workdir!r}")
  try:
    print(build_report(args.workdir))
  except FileNotFoundError as e:
    raise UserError(str(e)) from None
  return 0


def add_commands(commands) -> None:
  for name, handler, help_ in [("plan", cmd_plan, "print the plan: groups, FLOPs, memory, time"),
                               ("run", cmd_run, "run the plan in a workdir (resumable)")]:
    p = commands.add_parser(name, help=help_, allow_abbrev=False)
    p.add_argument("--config", required=True, metavar="FILE.py[:ARG]",
                   help="study config; --config.a.b=v overrides a field")
    if name == "run":
      p.add_argument("--workdir", required=True, help="where results and checkpoints go")
      p.add_argument("--no-progress", action="store_true", help="no progress bar")
      p.add_argument("--devices", default=None, metavar="I,J",
                     help="local devices this worker uses (GPU: as CUDA_VISIBLE_DEVICES)")
      p.add_argument("--exit-when-idle", action="store_true",
                     help="exit when the groups left are all held by other workers "
                          "(default: wait, and take over any whose lease lapses)")
      p.add_argument("--num-processes", type=int, default=1,
                     help="multi-process JAX, only for a TPU pod slice (default 1)")
      p.add_argument("--process-id", type=int, default=0, help="this process's index")
      p.add_argument("--coordinator", default="", help="HOST:PORT of process 0")
    p.set_defaults(handler=handler, accepts_options=True)
  p = commands.add_parser("status", help="every group of a workdir: done, running (holder, "
                          "step, ETA), stale or pending", allow_abbrev=False)
  p.add_argument("workdir")
  p.add_argument("--json", action="store_true", help="print JSON for scripts")
  p.set_defaults(handler=cmd_status)
  p = commands.add_parser("report", help="rebuild report.md, fits.json and plots of a workdir",
                          allow_abbrev=False)
  p.add_argument("workdir")
  p.set_defaults(handler=cmd_report)
