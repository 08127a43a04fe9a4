"""Schedules: which models of a group train in its program's slots, and when they leave.

A schedule's decisions are plain numpy on the slot table (sweep/slots.py), the stop state
(core/stopping.py) and held-out rows, so each is tested without compiling. `choose` picks
one from the run options; a new policy is one new class registered in SCHEDULES.
"""
from __future__ import annotations

from depthscale.sweep.schedules.base import Schedule, Static
from depthscale.sweep.schedules.halving import Halving
from depthscale.sweep.schedules.queue import Queue

SCHEDULES = {"static": Static, "queue": Queue, "halving": Halving}


def choose(specs, total: int, layout: str, steps_per_call: int, rule=None, slots: int = 0,
           rebuild_steps: int | None = None) -> Schedule:
  """The schedule of a group of `specs`: halving for train.stop=halving; a queue when a
  stopping rule is set or there are fewer slots than models (then a rule "none" is checked
  every steps_per_call, to refill freed slots); else static."""
  n = len(specs)
  queued = 0 < slots < n
  if rule is not None and rule.kind == "halving":
    return Halving(specs, total, layout, rule, rebuild_steps=rebuild_steps,
                   steps_per_call=steps_per_call)
  if (rule is not None and rule.kind != "none") or queued:
    return Queue(specs, total, layout, rule, slots=slots, rebuild_steps=rebuild_steps,
                 steps_per_call=steps_per_call)
  return Static(specs, total, layout)
