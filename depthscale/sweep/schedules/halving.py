"""The halving schedule (train.stop=halving, core/halving.py): one slot per scout; at each
rung the worse learning rates of a setting stop, and after the last rung the survivors'
other seeds take the freed slots."""
from __future__ import annotations

from depthscale.core import halving
from depthscale.sweep.schedules.queue import Queue


class Halving(Queue):
  name = "halving"

  def __init__(self, specs, total: int, layout: str, rule, rebuild_steps=None,
               steps_per_call: int = 100):
    self.ladder = halving.Ladder(specs, rule.eta, total, rule.every or steps_per_call)
    super().__init__(specs, total, layout, rule, slots=len(self.ladder.scouts),
                     rebuild_steps=rebuild_steps, steps_per_call=steps_per_call)

  def first(self) -> list[int]:
    return list(self.ladder.scouts)

  def stops(self, st, at, table, rows, frozen, scaled_by, counted) -> list:
    now = super().stops(st, at, table, rows, frozen, scaled_by, counted)
    in_slots = {int(i): rows[j] for j, i in enumerate(table.holder) if i >= 0}
    return now + self.ladder.halve(st, at, in_slots, table.entered, scaled_by, counted)

  def may_enter(self, st, i: int, at: int) -> bool:
    return super().may_enter(st, i, at) and self.ladder.eligible(i, at)

  def training(self, st, at: int, table) -> bool:
    """Also while a queued seed may still enter (every scout may be frozen early)."""
    return bool((table.holder >= 0).any() or (st.stopped_at[table.queued] < 0).any())
