"""Rebuilding a group's program when its slots go idle (train.rebuild).

When models stop and the queue holds nothing for some slots (a compacted slot takes only
its own depth), those slots are still computed. At a stopping check a smaller or
re-shaped program may pay: the models in training keep their state (copied from their
old slots), queued models of any shape take the idle slots (initialised as the builder
does), and the rest is dropped. It pays when the idle share of the program's cost over
the steps left (as the stops seen so far predict them) is worth more than a compile.

The decision is a function of the slot table, the stop state and `compile_steps` only,
never of a rate measured in the run: a rerun after a kill makes the same rebuilds at the
same steps, so its results are the uninterrupted run's to the bit.
"""
from __future__ import annotations

import math

import jax
import numpy as np

from depthscale.core import program
from depthscale.sweep import slots as slots_lib

MODES = ("auto", "never")  # train.rebuild: rebuild when it pays, or never (compile_steps)


def compile_steps(mode: str, steps: int, compile_s: float, step_s: float) -> int | None:
  """What a rebuild costs, in steps of the group's program: None (never rebuild), `steps`
  when set (> 0), else the planner's cost model: plan.compile_s over its seconds per step
  (sweep/plan.step_seconds), so the same study decides alike on every rerun."""
  if mode == "never":
    return None
  if steps > 0:
    return steps
  return max(1, math.ceil(compile_s / max(step_s, 1e-12)))


def slot_costs(specs, layout: str) -> list[float]:
  """The relative cost per step of each slot holding `specs`: its layers (and the
  embedding and head) in a compacted program; equal in a padded one."""
  if layout != "compact":
    return [1.0] * len(specs)
  return [float(s.depth * s.repeats + 1) for s in specs]


def choose(holder, prog_specs, waiting, specs, layout: str, n_devices: int,
           steps_left: int, cost_steps: int) -> list[int] | None:
  """The models of a rebuilt program (spec indices: the busy slots' in program order,
  then waiting models, in queue order, into as many slots as are idle), or None when
  it does not pay: the idle cost it removes, over `steps_left`, is under `cost_steps`."""
  busy = [int(i) for i in holder if i >= 0]
  idle = len(holder) - len(busy)
  built = busy + [int(i) for i in waiting[:idle]]
  if not idle or not built:
    return None
  extra = program.fill([specs[i] for i in built], n_devices)[len(built):]  # idle fillers
  costs = slot_costs(prog_specs, layout)
  idle_old = sum(c for c, i in zip(costs, holder) if i < 0)
  idle_new = sum(slot_costs(extra, layout))
  gain = (idle_old - idle_new) / sum(costs) * steps_left
  return built if gain >= cost_steps and gain > 0 else None


def move(new: program.Program, state, hp, arch, holder, built):
  """(state, hp, arch, holder) of the rebuilt program `new` (built from specs `built`):
  each model in training copied from its old slot (its state, hyperparameters and
  arch), entering models as the builder initialised them, fillers idle and frozen."""
  order = new.order if new.order is not None else np.arange(len(new.specs))
  new_holder = np.asarray([built[x] if x < len(built) else slots_lib.IDLE for x in order],
                          np.int64)
  old = {int(i): j for j, i in enumerate(holder) if i >= 0}
  to = [p for p, i in enumerate(new_holder) if int(i) in old]
  src = [old[int(new_holder[p])] for p in to]

  trees = (new.state, new.hp, new.arch)
  if to:
    trees = slots_lib.copy_rows(trees, (state, hp, arch), to, src)
  state, hp, arch = trees
  return slots_lib.set_frozen(state, new_holder < 0), hp, arch, new_holder


def pad_rows(tree, m0: int):
  """Every leaf's models axis padded to m0 rows (copies of row 0): a checkpoint has the
  first program's size whatever the program now is."""
  m = jax.tree.leaves(tree)[0].shape[0]
  return tree if m == m0 else program.take(tree, list(range(m)) + [0] * (m0 - m))


def pad(index, m0: int) -> np.ndarray:
  """A list of spec indices padded with -1 to m0 (checkpointed with the slots)."""
  return np.asarray(list(index) + [-1] * (m0 - len(index)), np.int64)
