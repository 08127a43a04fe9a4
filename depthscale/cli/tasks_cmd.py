"""`depthscale tasks list | show | check`: what tasks there are and where each comes
from, examples of one, and one checked against the task contract before any GPU time.

A task is named as a study's `task` field names it (tasks/sources.py): a built-in or an
installed entry point, FILE.py:CLASS (here relative to the working directory) or
MODULE:CLASS. Unknown --key=value pairs are the task's options.
"""
from __future__ import annotations

from typing import Any, Sequence

from depthscale import tasks
from depthscale.cli.common import UsageError, parse_value
from depthscale.errors import UserError

WRAP = 100  # columns before a printed list wraps


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
  """Each named task, where it comes from, and the first line of its docstring; an entry
  point that fails to load is listed with its error (the others still are)."""
  rows = []
  for name in tasks.names():
    try:
      cls = tasks.REGISTRY.get(name) or tasks.sources.find(name, tasks.REGISTRY)
      doc = (cls.__doc__ or "").strip().splitlines()
      about = doc[0] if doc else ""
    except UserError as e:
      about = f"BROKEN: {e}"
    rows.append((name, tasks.origin(name), about))
  rows += _shadowed_rows()
  width = [max(len(r[i]) for r in rows) for i in range(2)]
  for name, where, about in rows:
    print(f"{name:<{width[0]}}  {where:<{width[1]}}  {about}")
  print("\nor a task of your own: --config.task=FILE.py:CLASS or MODULE:CLASS (docs/own_task.md)")
  return 0


def _shadowed_rows() -> list[tuple[str, str, str]]:
  """A row for each installed entry point named like a built-in: the built-in wins the
  name, so the row says how to reach the package's task and what to rename."""
  rows = []
  for name, ep in sorted(tasks.sources.entry_points().items()):
    if name in tasks.REGISTRY:
      dist = getattr(getattr(ep, "dist", None), "name", None) or "an installed package"
      rows.append((name, f"entry point {ep.value} ({dist})",
                   f"SHADOWED by the built-in {name!r}: rename the entry point in {dist}'s "
                   f"entry_points (group {tasks.sources.ENTRY_POINTS}), or give the task as "
                   f"{ep.value}"))
  return rows


def _task_and_length(args, extras, refuse=True):
  task = tasks.make(args.name, **parse_task_options(extras))
  if args.length is None and refuse:
    _refuse_broken(task, [])  # default_length among the attributes
  length = task.default_length if args.length is None else args.length
  try:
    task.check_length(length)  # before any JAX work
  except ValueError as e:  # a UserError, or the ValueError base.py asks a task for
    raise UserError(f"task {type(task).__name__} refuses --length {length!r}: "
                    f"{' '.join(str(e).split())[:200]}") from None
  if not 0 <= args.seed < 2**32:
    raise UsageError(f"--seed {args.seed}: give a seed in [0, 2^32) (JAX keeps 32 bits)")
  return task, length


def _refuse_broken(task, lengths) -> None:
  """The structural contract (tasks/contract.py) as one UserError line."""
  from depthscale.tasks import contract  # deferred: JAX starts here
  problems = contract.structural(task, lengths)
  if problems:
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    raise UserError(f"task {type(task).__name__} breaks the task contract: {problems[0]}"
                    f"{more}; `depthscale tasks check` lists every check")


def cmd_tasks_show(args, extras) -> int:
  if not 1 <= args.n <= 1000:
    raise UsageError(f"-n must be a number of examples in [1, 1000], got {args.n}")
  task, length = _task_and_length(args, extras)
  _refuse_broken(task, [length])
  import jax  # deferred: listing and argument errors need no JAX runtime
  batch = task.sample(jax.random.key(args.seed), args.n, length)
  print(f"{task!r}: length {length}, seq_len {task.seq_len(length)}, seed {args.seed}")
  for i in range(args.n):
    print(f"\n# example {i}")
    try:
      example = task.decode(batch, i)
    except Exception as e:  # noqa: BLE001 -- the task's code: one line, as tasks check says it
      raise UserError(f"task {type(task).__name__}: decode(batch, {i}) raised "
                      f"{type(e).__name__}: {' '.join(str(e).split())[:200]}") from None
    if not isinstance(example, dict):
      raise UserError(f"task {type(task).__name__}: decode(batch, {i}) returned "
                      f"{type(example).__name__}; return a dict of plain values")
    print(format_example(example))
  return 0


def cmd_tasks_check(args, extras) -> int:
  """Exit 0 when the contract holds and sampling does not dominate a step, else 1 with
  one line per problem."""
  if not 1 <= args.batch_size <= 2**20:
    raise UsageError(f"--batch-size must be in [1, 2^20], got {args.batch_size}")
  from depthscale.tasks import contract  # deferred: JAX starts here
  if args.length is None:  # no length to check at without a default: say why, as FAILs
    task = tasks.make(args.name, **parse_task_options(extras))
    problems = contract.structural(task, [])
    if problems:
      print("\n".join(f"FAIL: {p}" for p in problems) + f"\n{len(problems)} problem(s)")
      return 1
  task, length = _task_and_length(args, extras, refuse=False)
  problems = contract.check(task, length, args.seed)
  if not problems:
    problems = contract.across_processes(task, args.name, parse_task_options(extras), length,
                                         args.seed)
  print(f"{task!r} at length {length} (seq_len {task.seq_len(length)}), from "
        f"{tasks.origin(args.name)}")
  if not problems and not args.no_cost:
    from depthscale.bench import task_cost
    cost = task_cost.measure(task, length, args.batch_size)
    line = (f"sampling {1e3 * cost['sample_s']:.2f} ms per batch of {args.batch_size}, "
            f"{100 * cost['fraction']:.0f}% of a training step of a depth-2 width-64 model "
            f"({1e3 * cost['step_s']:.2f} ms)")
    if cost["fraction"] > task_cost.DOMINATES:
      problems.append(line + "; the sampler dominates the step: make sample cheaper "
                      "(vectorise it, precompute tables in __init__)")
    else:
      print("ok: " + line)
  for p in problems:
    print(f"FAIL: {p}")
  print(f"{len(problems)} problem(s)" if problems else "the task keeps the contract")
  return 1 if problems else 0


def add_commands(commands) -> None:
  """`tasks list`, `tasks show` and `tasks check` under `commands`."""
  tasks_parser = commands.add_parser("tasks", help="list the tasks, show samples of one, "
                                     "check one against the contract", allow_abbrev=False)
  task_commands = tasks_parser.add_subparsers(dest="tasks_command",
                                              metavar="{list,show,check}", required=True)
  listing = task_commands.add_parser("list", help="task names, where each comes from, and "
                                     "one-line descriptions", allow_abbrev=False)
  listing.set_defaults(handler=cmd_tasks_list)
  spec_help = "a task name (see `depthscale tasks list`), FILE.py:CLASS or MODULE:CLASS"
  show = task_commands.add_parser(
      "show", help="sample and print examples; unknown --key=value pairs are task options",
      allow_abbrev=False)
  show.add_argument("name", metavar="TASK", help=spec_help)
  show.add_argument("-n", type=int, default=3, help="number of examples (default 3)")
  check = task_commands.add_parser(
      "check", help="check a task against the contract (purity, jit/vmap, shapes, ranges, "
      "decode, prefix consistency, measures, sampling cost); --key=value are task options",
      allow_abbrev=False)
  check.add_argument("name", metavar="TASK", help=spec_help)
  check.add_argument("--batch-size", type=int, default=32,
                     help="batch of the cost measurement (default 32, the study default)")
  check.add_argument("--no-cost", action="store_true",
                     help="skip timing the sampler against a training step")
  for p in (show, check):
    p.add_argument("--length", type=int, default=None,
                   help="the task's size parameter (default: the task's default_length)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
  show.set_defaults(handler=cmd_tasks_show, accepts_options=True)
  check.set_defaults(handler=cmd_tasks_check, accepts_options=True)
