"""The train section: the budget, optimizer, stopping rule, slots and curriculum every
group of a study trains with, and their checks. The valid names are the registries of
the code that acts on them (core/train.py, core/stopping.py, sweep/resize.py)."""
from __future__ import annotations

import ml_collections

from depthscale.config.base import ConfigError, accuracy, choice, examples, number
from depthscale.config.fields import field, one_of, section
from depthscale.core import halving, stopping
from depthscale.core import train as train_lib
from depthscale.sweep import plan as planner
from depthscale.sweep import resize
from depthscale.tasks import contract


def add(c: ml_collections.ConfigDict) -> None:
  section(c, "train", "the budget, optimizer, stopping rule, slots and curriculum every "
          "group of the study trains with")
  for part in (_add_budget, _add_curriculum, _add_stopping, _add_growth):  # config.json's order
    part(c)


def _add_budget(c) -> None:
  field(c, "train.batch_size", 32, "examples per model per step (at most 2^20)")
  field(c, "train.steps", 1000, "each model's step budget (a multiple of steps_per_call); "
        "a stopping rule may end a model sooner")
  field(c, "train.steps_per_call", 100, "the most steps one dispatch to the device runs; "
        "steps, stop_every and checkpoint_every are multiples of it")
  field(c, "train.weight_decay", 0.01, "AdamW's weight decay, on weight matrices only")
  field(c, "train.warmup", 0, "steps of linear warm-up of the learning rate (0: none)")
  field(c, "train.decay", "constant", f"the learning rate after warm-up: "
        f"{one_of(train_lib.DECAYS)} (decayed to 0 at the last step)")
  field(c, "train.clip_norm", 1.0, "the global gradient norm clipped to (0: no clipping)")


def _add_curriculum(c) -> None:
  field(c, "train.curriculum", "none", f"how a model's length grows to the grid's: "
        f"{one_of(train_lib.CURRICULA)} (through lengths 2, 4, 8, ...; a prefix-consistent "
        "task only)")
  field(c, "train.steps_per_stage", 0, "curriculum=fixed: steps at each curriculum length")
  field(c, "train.advance_at", 0.95, "curriculum=adaptive (and growth past the grid's "
        "length): the training-batch accuracy that moves a model to its next length")
  field(c, "train.models_per_chunk", 0, "> 0: each step runs the vmapped models this many "
        "at a time (less live memory; measured faster on CPU for wide models, see "
        "BUILD_NOTES); 0: all at once")


def _add_stopping(c) -> None:
  field(c, "train.stop", "none", f"the stopping rule: {one_of(stopping.RULES)} "
        "(core/stopping.py), checked on the held-out set every stop_every steps; plateau: "
        "after `patience` evaluations without improvement; halving: successive halving over "
        "each setting's learning rates (core/halving.py). steps stays the upper bound")
  field(c, "train.stop_every", 0, "steps between the stopping rule's checks (a multiple of "
        "steps_per_call; 0: every steps_per_call)")
  field(c, "train.patience", 5, "stop=plateau: evaluations without improvement before a "
        "model stops")
  field(c, "train.eta", 3, "stop=halving: the best 1/eta of a setting's learning rates "
        "still in play go on at each rung (an int >= 2)")
  field(c, "train.slots", 0, "> 0: each group's program trains this many models at once; "
        "the rest queue and take the slot of a model that is done (continuous batching, "
        "sweep/slots.py); 0: all at once")
  field(c, "train.rebuild", "auto", f"with a stopping rule: {one_of(resize.MODES)}; auto "
        "drops idle slots (or gives them to queued models of another depth) in a rebuilt "
        "program when their cost over the steps left exceeds a compile of rebuild_steps "
        "steps (sweep/resize.py)")
  field(c, "train.rebuild_steps", 0, "the steps a rebuild's compile is priced at (0: "
        "plan.compile_s over the planner's seconds per step)")


def _add_growth(c) -> None:
  field(c, "train.length_max", 0, "> the grid's length: a model that solves every counted "
        "position of its last length on a training batch (at advance_at) grows to 2x, 4x, "
        "... that length (then length_max), until it fails to or reaches length_max; its n* "
        "is measured on a held-out set at length_max. 0: no growth")
  field(c, "train.length_buckets", True, "each step computes only the positions its models' "
        "furthest stage needs (a bucket per stage, core/lengths.py); False: the full length "
        "at every step")


def check_batch(c) -> None:
  examples(c, "train.batch_size")


def check_steps(c) -> int:
  """train.steps a multiple of train.steps_per_call; returns steps_per_call."""
  steps = number(c, "train.steps", 1, integer=True)
  k = number(c, "train.steps_per_call", 1, integer=True)
  if steps % k:
    raise ConfigError(f"train.steps: {steps} is not a multiple of train.steps_per_call={k}")
  return k


def check(c, task, k: int) -> None:
  """The optimizer, the stopping rule, the slots and the curriculum."""
  number(c, "train.weight_decay", 0.0)
  number(c, "train.warmup", 0, integer=True)
  number(c, "train.clip_norm", 0.0)
  number(c, "train.models_per_chunk", 0, integer=True)
  choice(c, "train.decay", train_lib.DECAYS)
  stop_every = _check_stop(c, task, k)
  slots = number(c, "train.slots", 0, integer=True)
  choice(c, "train.rebuild", resize.MODES)
  number(c, "train.rebuild_steps", 0, integer=True)
  if c.train.stop == "halving":
    _check_halving(c, slots, stop_every or k)
  shapes = {(d, r) for d in c.grid.depth for r in c.grid.repeats}
  if 0 < slots < len(shapes) and planner.may_compact(c.plan.strategy):
    raise ConfigError(f"train.slots: {slots} slots cannot hold the grid's {len(shapes)} "
                      "depths in a compacted program (a queued model enters a slot of its "
                      "own depth); give at least that many, or plan.strategy=pad")
  _check_curriculum(c, task)
  _check_growth(c, task)


def check_advance_at(c) -> None:
  accuracy(c, "train.advance_at")


def _check_stop(c, task, k: int) -> int:
  """train.stop and its interval; returns stop_every."""
  choice(c, "train.stop", stopping.RULES)
  if c.train.stop == "solved" and task.scaled_by == "loss":
    raise ConfigError(f"train.stop: task {c.task!r} is measured by loss and has no solved "
                      "state; use plateau (or none)")
  stop_every = number(c, "train.stop_every", 0, integer=True)
  if stop_every % k:
    raise ConfigError(f"train.stop_every: {stop_every} is not a multiple of "
                      f"train.steps_per_call={k} (0: every steps_per_call steps)")
  number(c, "train.patience", 1, integer=True)
  if stop_every and c.train.steps % stop_every:
    raise ConfigError(f"train.steps: {c.train.steps} is not a multiple of train.stop_every="
                      f"{stop_every} (a model's budget ends at a check)")
  return stop_every


def _check_halving(c, slots: int, every: int) -> None:
  eta = number(c, "train.eta", 2, integer=True)
  if c.get("design") and c.design.get("kind") == "adaptive":
    raise ConfigError("train.stop=halving chooses among learning rates and "
                      "design.kind=adaptive places seeds at one; use train.stop=solved or "
                      "plateau with the design (or design.kind=grid with halving)")
  if len(c.grid.lr) < 2:
    raise ConfigError("train.stop=halving: grid.lr lists one learning rate; halving "
                      "chooses among several (give two or more)")
  if slots:
    raise ConfigError(f"train.slots: {slots}; with train.stop=halving a group has one slot "
                      "per setting and learning rate (its first seed); leave slots at 0")
  rungs = halving.rung_steps(len(c.grid.lr), eta, c.train.steps, every)
  if rungs[0] <= 0:
    raise ConfigError(f"train.steps: {c.train.steps} is too short for {len(rungs)} halving "
                      f"rung(s) of eta={eta} at stop_every={every} (the first rung needs "
                      f"steps >= {eta ** len(rungs) * every})")


def _check_curriculum(c, task) -> None:
  choice(c, "train.curriculum", train_lib.CURRICULA)
  if c.train.curriculum == "fixed":
    number(c, "train.steps_per_stage", 1, integer=True)
  if c.train.curriculum != "none" and not getattr(task, "prefix_consistent", False):
    raise ConfigError(f"train.curriculum: task {c.task!r} has no length curriculum "
                      "(its examples are not prefix-consistent); use 'none'")


def _check_growth(c, task) -> None:
  """train.length_max: 0, or past every grid length, on a task with an n* that the
  prefix of a longer example measures, in a study whose programs hold every model to the
  end; and a length the task can sample."""
  if not isinstance(c.train.length_buckets, bool):
    raise ConfigError(f"train.length_buckets: {c.train.length_buckets!r} is not true or false")
  top = number(c, "train.length_max", 0, integer=True)
  if top == 0:
    return
  grid = max(c.grid.length)
  why = (f"the grid's length is {grid}; give a larger length_max" if top <= grid else
         f"it is measured by {task.scaled_by}, not n* (growth measures n*)"
         if task.scaled_by != "n_star" else
         "its examples are not prefix-consistent (a longer example's prefix must be a "
         "shorter one)" if not getattr(task, "prefix_consistent", False) else
         "the fixed curriculum has no rule to grow by; use adaptive or none"
         if c.train.curriculum == "fixed" else
         f"train.stop={c.train.stop} ends models early; growth needs stop=none"
         if c.train.stop != "none" else
         "train.slots queue models; growth needs slots=0" if c.train.slots else "")
  if why:
    raise ConfigError(f"train.length_max: {top} cannot grow task {c.task!r}: {why}")
  try:
    task.check_length(top)
    problems = contract.structural(task, [top])  # sizes, shapes, 2^20 positions at most
  except ValueError as e:
    problems = [" ".join(str(e).split())]
  if problems:
    raise ConfigError(f"train.length_max: task {c.task!r} cannot sample length {top}: "
                      f"{problems[0]}")
