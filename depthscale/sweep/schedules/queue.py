"""The queue schedule: a stopping rule judged every `rule.every` steps, freed slots refilled
from the queue (continuous batching, train.slots), and idle slots dropped or re-shaped in a
rebuilt program when that pays (train.rebuild, sweep/resize.py)."""
from __future__ import annotations

import dataclasses

import numpy as np

from depthscale.core import stopping
from depthscale.sweep import resize, slots as slots_lib
from depthscale.sweep.schedules.base import Schedule


class Queue(Schedule):
  name = "queue"

  def __init__(self, specs, total: int, layout: str, rule=None, slots: int = 0,
               rebuild_steps: int | None = None, steps_per_call: int = 100):
    super().__init__(specs, total, layout)
    if rule is None or rule.kind == "none":
      rule = stopping.Rule("none", every=steps_per_call)
    self.rule = dataclasses.replace(rule, budget=total)
    self.every = self.rule.every or steps_per_call
    self.n_slots = slots if 0 < slots < self.n else self.n
    self.rebuild_steps = rebuild_steps

  @property
  def queue(self) -> bool:
    return self.n_slots < self.n

  def first(self) -> list[int]:
    return slots_lib.first_models(self.specs, self.n_slots, self.layout)

  def stops(self, st, at, table, rows, frozen, scaled_by, counted) -> list:
    items = [(int(i), at - table.entered[i], rows[j], frozen[j])
             for j, i in enumerate(table.holder) if i >= 0]
    return self.rule.update(st, items, scaled_by, counted)

  def may_enter(self, st, i: int, at: int) -> bool:
    return self.queue and st.stopped_at[i] < 0

  def rebuild(self, st, at, table, prog_specs, n_devices, steps_left):
    if self.rebuild_steps is None:
      return None
    waiting = [i for i in table.queued if st.stopped_at[i] < 0 and self.may_enter(st, i, at)]
    return resize.choose(table.holder, prog_specs, waiting, self.specs, self.layout,
                         n_devices, steps_left, self.rebuild_steps)

  def fields(self, table, built, size: int) -> dict:
    """The slot table and the models the program was built from, padded to `size` slots
    (the first program's: a rebuilt one may be smaller)."""
    return {"table": table.as_tree(size), "built": resize.pad(built, size)}

  def restore(self, saved: dict):
    built = [int(i) for i in np.asarray(saved["built"]) if i >= 0]
    return slots_lib.SlotTable.from_tree(saved["table"]), built
