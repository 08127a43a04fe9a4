"""The schedule interface, and the static schedule (every model trains the whole budget in
its own slot, with no check on the way)."""
from __future__ import annotations

import numpy as np


class Schedule:
  """One small interface. A group run asks, in this order: `first()` (the models the
  program is built from), and at each check (group step `at`, every `every` steps):
  `stops(...)` (which models in slots stop now), `enters(...)` (which queued model takes
  each free slot), `rebuild(...)` (the models of a rebuilt program, or None); between
  dispatches `training(...)`. `checks` False: no checks, the models are evaluated at the
  end; `fillers_train`: a filler slot trains a copy of the last model (else it is idle).
  `fields(...)` / `restore(...)`: what the schedule adds to a checkpoint."""
  name = "schedule"
  checks = True
  fillers_train = False
  queue = False      # fewer slots than models: free slots take queued models
  every = None

  def __init__(self, specs, total: int, layout: str):
    self.specs, self.total, self.layout, self.n = list(specs), total, layout, len(specs)

  def first(self) -> list[int]:
    return list(range(self.n))

  def stops(self, st, at: int, table, rows, frozen, scaled_by: str, counted: int) -> list:
    return []

  def may_enter(self, st, i: int, at: int) -> bool:
    return False

  def enters(self, st, at: int, table, slot_shapes, shapes) -> dict:
    """{free slot: the queued model that takes it} (spec indices)."""
    out, taken = {}, set()
    for j in np.nonzero(table.holder < 0)[0]:
      i = table.next_for(slot_shapes[j], shapes,
                         lambda i: i not in taken and self.may_enter(st, i, at))
      if i is not None:
        out[int(j)] = i
        taken.add(i)
    return out

  def rebuild(self, st, at: int, table, prog_specs, n_devices: int, steps_left: int):
    return None

  def training(self, st, at: int, table) -> bool:
    return bool((table.holder >= 0).any())

  def fields(self, table, built, size: int) -> dict:
    return {}

  def restore(self, saved: dict):
    """(table, built) from a checkpoint's fields (None, None: as the program starts)."""
    return None, None


class Static(Schedule):
  """Every model holds its slot for the whole budget; evaluated once at the end."""
  name = "static"
  checks = False
  fillers_train = True

  def training(self, st, at: int, table) -> bool:
    return at < self.total
