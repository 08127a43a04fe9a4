# Run: python launch/slurm.py --config experiments/a5_depth.py --workdir /shared/runs/a5 \
#        [--partition gpu --gpus-per-node 1 --tasks 7 --timeout-min 1440] [--dry-run]
"""Submit a study's plan to SLURM as a job array (submitit) of workers that pull its groups.

Every task runs the same resumable runner on the one shared workdir and pulls groups,
largest first, until none is left (leases keep two tasks from training one group, and
let a task take over a group whose holder died). A task that times out or is preempted
(SIGUSR2 from submitit) checkpoints at its current step within seconds, is requeued by
submitit and resumes from that step. The last task to finish merges results.csv and
the report; `depthscale report WORKDIR` rebuilds it at any time.
"""
from __future__ import annotations

import math
import os
import sys

import submitit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from depthscale.cli.common import (Once, Parser, config_overrides, in_range,  # noqa: E402
                                   one_line)  # (after the path fix)
from depthscale import config as config_lib  # noqa: E402
from depthscale.errors import UserError  # noqa: E402
from depthscale.sweep.array_task import ArrayTask  # noqa: E402


MAX_TASKS = 100_000      # array tasks; SLURM's MaxArraySize is usually far lower
MAX_MINUTES = 366 * 24 * 60


def parser() -> Parser:
  ap = Parser(prog="slurm.py", description=__doc__.splitlines()[0], allow_abbrev=False)
  ap.add_argument("--config", required=True, metavar="FILE.py[:ARG]", action=Once)
  ap.add_argument("--workdir", required=True, action=Once,
                  help="shared by every task (e.g. on NFS)")
  ap.add_argument("--partition", default=None)
  ap.add_argument("--gpus-per-node", type=int, default=0)
  ap.add_argument("--cpus-per-task", type=int, default=None)
  ap.add_argument("--mem-gb", type=int, default=None)
  ap.add_argument("--timeout-min", type=int, default=24 * 60)
  ap.add_argument("--tasks", "--shards", type=int, default=0,
                  help="array tasks (default: one per group)")
  ap.add_argument("--parallel", type=int, default=0, help="most tasks running at once")
  ap.add_argument("--dry-run", action="store_true", help="print the array; submit nothing")
  ap.add_argument("--wait", action="store_true", help="wait for the array, then report")
  return ap


def check_bounds(args) -> None:
  """Every number of the command line in range (one UsageError line), before the study."""
  in_range("--timeout-min", args.timeout_min, 1, MAX_MINUTES, "minutes")
  in_range("--tasks", args.tasks, 0, MAX_TASKS, "a number of array tasks (0: one per group)")
  in_range("--parallel", args.parallel, 0, MAX_TASKS, "a number of tasks (0: all)")
  in_range("--gpus-per-node", args.gpus_per_node, 0, 64, "GPUs")
  if args.cpus_per_task is not None:
    in_range("--cpus-per-task", args.cpus_per_task, 1, 4096, "CPUs")
  if args.mem_gb is not None:
    in_range("--mem-gb", args.mem_gb, 1, 1 << 20, "GB")


def main(argv=None) -> int:
  """The CLI's error path: a user error is one line `slurm.py: error: ...` and exit 2."""
  try:
    return _main(argv)
  except UserError as e:
    print(f"slurm.py: error: {one_line(e)}", file=sys.stderr)
    return 2


def _main(argv) -> int:
  args, extras = parser().parse_known_args(argv)
  check_bounds(args)
  overrides = config_overrides(extras)
  from depthscale.io import results_csv, workdir as workdir_lib
  from depthscale.sweep import design_rounds, plan, study as study_lib
  study = study_lib.resolve(config_lib.load(args.config, overrides))
  c, groups = study.config, plan.make_plan(study)
  count = args.tasks or len(groups)
  order = plan.largest_first(study, groups)
  if design_rounds.is_adaptive(study):  # the first round's groups, then a round at a time
    first = plan.make_plan(design_rounds.first_study(study))
    count = args.tasks or max(len(first), math.ceil(c.design.budget * len(groups)))
    order = plan.largest_first(study, first)
    print(f"{c.name}: adaptive design: {len(first)} first-round groups of the grid's "
          f"{len(groups)}; the array sized by the budget ({c.design.budget:g} of the grid): "
          "its tasks pull each round's groups and wait at its barrier until the design stops")
  workdir = os.path.abspath(args.workdir)
  workdir_lib.check(workdir)  # a file, unwritable, damaged: refused before anything
  study_lib.claim_workdir(study, workdir, write=not args.dry_run)  # another study: refused
  print(f"{c.name}: {len(groups)} groups -> array of {count} tasks, workdir {workdir}; each "
        f"task pulls the largest unclaimed group until none is left (lease {c.lease_s:g} s)")
  print("  order: " + ", ".join(f"{g.id} ({len(g.cells)} models)" for g in order))
  if args.dry_run:
    return 0
  executor = submitit.AutoExecutor(folder=os.path.join(workdir, "slurm", "%j"))
  params = dict(timeout_min=args.timeout_min, slurm_partition=args.partition,
                gpus_per_node=args.gpus_per_node or None, cpus_per_task=args.cpus_per_task,
                mem_gb=args.mem_gb, slurm_array_parallelism=args.parallel or count,
                name=c.name)
  executor.update_parameters(**{k: v for k, v in params.items() if v is not None})
  spec = os.path.abspath(args.config.partition(":")[0])
  spec += ":" + args.config.partition(":")[2] if ":" in args.config else ""
  with executor.batch():
    jobs = [executor.submit(ArrayTask(spec, overrides, workdir)) for _ in range(count)]
  print(f"submitted array {jobs[0].job_id.split('_')[0]} ({count} tasks); "
        f"logs in {workdir}/slurm/")
  if args.wait:
    for j in jobs:
      j.result()
    from depthscale.report import build_report
    results_csv.merge_results(workdir)
    print(f"report: {build_report(workdir)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
