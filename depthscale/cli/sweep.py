"""The sweep subcommands of the CLI: `plan`, `run`, `status`, `report`.

Each handler resolves the study once (sweep/study.py: one-line errors before any
compilation) and calls the library; cli/app.py registers them with `add_commands`.
"""
from __future__ import annotations

import errno
import json
import os
import sys

from depthscale import config as config_lib
from depthscale.cli.common import Once, check_writable, load_config, write_json
from depthscale.cli.plan_format import format_plan
from depthscale.errors import UserError
from depthscale.io.places import check_exists, check_link
from depthscale.sweep import study as study_lib

MAX_WORKERS = 100_000  # --workers: more than any cluster's array; a bound before allocating


def cmd_plan(args, extras) -> int:
  from depthscale.sweep import estimate, plan, probe
  study = study_lib.resolve(load_config(args.config, extras))
  c = study.config
  if not 1 <= args.workers <= MAX_WORKERS:
    raise UserError(f"--workers {args.workers}: give a count in [1, {MAX_WORKERS}]")
  if args.json is not None:
    check_writable(args.json)
  groups = plan.make_plan(study)
  do_probe = not args.no_probe and args.device is None
  if do_probe:
    check_cache()
  if args.device is not None:
    from depthscale import devices
    spec = devices.lookup(args.device)  # one-line error for an unknown name, before JAX
    if spec is not None:  # `auto` weighs padding against compiles at that device's rate
      groups = plan.make_plan(study, devices.rate(spec.peak_flops(study.peak_dtype),
                                                  c.plan.mfu))
  t = c.train
  print(f"{c.name}: {sum(len(g.cells) for g in groups)} models, {t.steps} steps each, "
        f"batch {t.batch_size}, compute {c.model.compute_dtype}", flush=True)
  if do_probe:
    import jax
    from tqdm.auto import tqdm
    study.start_jax()
    devs = jax.local_devices()
    groups = plan.make_plan(study, probe.flops_per_s(study, devs))
    groups = probe.fit(study, groups, plan.share_of(devs, groups), log=print)
    devs = plan.share_of(devs, groups)  # as run does
    print(f"probing {len(groups)} groups on {len(devs)} x {devs[0].device_kind} each "
          f"({jax.local_device_count() // len(devs)} side by side; compile, then time a few "
          "steps; cached for `run`)", flush=True)
    est = estimate.from_probes(study, groups, devs, progress=lambda it, n: tqdm(
        it, total=n, desc="probe", unit="group", disable=args.no_progress, leave=False))
  else:
    est = estimate.from_flops(study, groups, args.device)
  est = estimate.totals(est, args.workers)
  print(format_plan(est, c))
  if args.json:
    write_json(args.json, est)
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
  host, _, port = args.coordinator.rpartition(":")
  if args.coordinator and not (host and port.isdigit() and 0 < int(port) < 65536):
    raise UserError(f"--coordinator {args.coordinator!r}: give HOST:PORT, e.g. "
                    "node001:12345")
  if args.num_processes == 1 and (args.coordinator or args.process_id):
    raise UserError("--coordinator and --process-id need --num-processes > 1 (a TPU pod "
                    "slice); independent workers need neither")


def cmd_run(args, extras) -> int:
  from depthscale.io import workdir as workdir_lib
  from depthscale.sweep import runner
  study = study_lib.resolve(load_config(args.config, extras))  # before starting anything
  ids = parse_devices(args.devices)
  check_worker_flags(args)
  check_cache()
  workdir_lib.check(args.workdir)
  others = companions(study, args.workdir)
  if ids is not None:
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, ids))  # before JAX starts
  study_lib.reproducible_xla()  # before JAX starts its backends (XLA_FLAGS)
  worker_jax(args)
  devices = select_devices(ids)
  runner.run(study, args.workdir, progress=not args.no_progress, devices=devices,
             exit_when_idle=args.exit_when_idle)
  if others:
    from depthscale.report import build_report
    for name, (other, workdir) in others.items():
      print(f"depthscale: companion run {name!r} ({study.config.report.companions[name]}) "
            f"in {workdir}", file=sys.stderr)
      runner.run(other, workdir, progress=not args.no_progress, devices=devices,
                 exit_when_idle=args.exit_when_idle)
    build_report(args.workdir)  # the study beside its companions
  return 0


def check_cache() -> None:
  """A one-line UserError if $DEPTHSCALE_CACHE (where probes are kept) is not a directory."""
  root = os.environ.get("DEPTHSCALE_CACHE")
  if root and os.path.exists(root) and not os.path.isdir(root):
    raise UserError(f"DEPTHSCALE_CACHE={root!r} is a file; point it at a directory (or "
                    "unset it for ~/.cache/depthscale)")


def companions(study, workdir: str) -> dict:
  """{name: (Study, workdir/name)} of the study's companion runs (report.companions),
  each loaded and resolved now, before anything compiles. A companion trains the
  study's seeds and steps (grid.seed and train.steps, overrides included), so that it
  stands beside it seed for seed at the same budget, in the study's process on its
  devices (plan.cpu_devices)."""
  from depthscale.io import workdir as workdir_lib
  out = {}
  for name, spec in (study.config.report.companions or {}).items():
    other = config_lib.load(spec)
    other.grid.seed = list(study.config.grid.seed)
    other.train.steps = study.config.train.steps
    other.plan.cpu_devices = study.config.plan.cpu_devices
    sub = os.path.join(workdir, name)
    workdir_lib.check(sub)
    out[name] = (study_lib.resolve(other), sub)
  return out


def cmd_status(args, extras) -> int:
  from depthscale.sweep import status
  if extras:
    raise UserError(f"unrecognized arguments: {' '.join(extras)}")
  check_link(args.workdir, run=False)
  report = status.status(args.workdir)
  if args.json:
    print(json.dumps(report, indent=2))
  else:
    print(status.format_status(report))
  return 0


def cmd_report(args, extras) -> int:
  from depthscale.report import build_report
  if extras:
    raise UserError(f"unrecognized arguments: {' '.join(extras)}")
  check_exists(args.workdir)
  try:
    print(build_report(args.workdir))
  except FileNotFoundError as e:
    raise UserError(str(e)) from None
  except OSError as e:  # a read-only or full workdir: the report files cannot be written
    if e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT):
      raise
    raise UserError(f"report: cannot write {e.filename or 'its files'} ({e.strerror}); the "
                    f"report is written into the workdir: make {args.workdir} writable, or "
                    "copy it somewhere writable and report there") from None
  return 0


def add_commands(commands) -> None:
  for name, handler, help_ in [("plan", cmd_plan, "print the plan: groups, FLOPs, memory, time"),
                               ("run", cmd_run, "run the plan in a workdir (resumable)")]:
    p = commands.add_parser(name, help=help_, allow_abbrev=False)
    p.add_argument("--config", required=True, metavar="FILE.py[:ARG]", action=Once,
                   help="study config; --config.a.b=v overrides a field")
    if name == "plan":
      p.add_argument("--no-probe", action="store_true",
                     help="estimate from FLOPs at a device's peak instead of compiling and "
                          "timing each program here")
      p.add_argument("--device", default=None, metavar="NAME",
                     help="price the plan for this device (h100, h200, a100, tpu-v4, "
                          "tpu-v5e, tpu-v5p, cpu) from FLOPs; implies --no-probe")
      p.add_argument("--workers", type=int, default=1,
                     help="workers sharing the plan, for the per-worker wall time")
      p.add_argument("--json", default=None, metavar="FILE",
                     help="also write {device, groups: [{id, models, compile_s, step_s, "
                          "est_train_s, memory_bytes, ...}], est_train_s} to FILE")
      p.add_argument("--no-progress", action="store_true", help="no progress bar")
    if name == "run":
      p.add_argument("--workdir", required=True, action=Once,
                     help="where results and checkpoints go")
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
