"""What a caller gives a group run (sweep/group_run.py) beyond its program, and what it
hears back: the run options, the hooks, the stop that interrupts it, and how many steps
one dispatch runs."""
from __future__ import annotations

import dataclasses

from depthscale.core import stopping


class Interrupted(Exception):
  """A stop was requested (SIGTERM/SIGUSR2); the state was checkpointed at `step`."""

  def __init__(self, step: int):
    super().__init__(f"stopped at step {step}")
    self.step = step


@dataclasses.dataclass(frozen=True)
class RunOptions:
  """How a group trains beyond its program: the held-out evaluation, checkpoints, the
  stopping rule and slots (the schedule), a rebuild's cost in program steps (None:
  never) and the bytes a rebuilt program may use per device (None: no limit)."""
  eval_size: int = 1000
  threshold: float = 0.95
  checkpoint_every: int = 0
  stop: stopping.Rule | None = None
  slots: int = 0
  rebuild_steps: int | None = None
  memory_limit: float | None = None


class Hooks:
  """What the caller hears from a group in training (the defaults do nothing):
  `should_stop()` after every dispatch (True: checkpoint at the current step, then
  Interrupted); `before_save(step, curves)` before every checkpoint (it may raise to
  abandon the group, e.g. a lost lease); `on_progress(step, steps_per_s)` after every
  dispatch read back; `on_slots(summary)` after every stopping check (sweep/slots.summary)."""

  def should_stop(self) -> bool:
    return False

  def before_save(self, step: int, curves: dict) -> None:
    pass

  def on_progress(self, step: int, steps_per_s: float | None) -> None:
    pass

  def on_slots(self, summary: dict) -> None:
    pass


DISPATCH_S = 2.0  # target seconds of one dispatch: a stop request waits for at most ~2


def next_dispatch(n: int, steps_per_s: float | None, k: int) -> int:
  """Steps in the next dispatch: double from 1 until a rate is measured, then enough
  for about DISPATCH_S seconds; never more than steps_per_call (k)."""
  if steps_per_s is None:
    return min(2 * n, k)
  return max(1, min(k, int(steps_per_s * DISPATCH_S)))
