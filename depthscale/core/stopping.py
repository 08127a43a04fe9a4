"""Stopping rules (`train.stop`): when a model of a group is done before the step budget.

  none     every model trains the whole budget (the default)
  solved   the held-out measure the task is scaled by is solved: n* = every counted position
           (scaled_by "n_star"), sequence accuracy >= eval.threshold ("size"); a task
           scaled by loss has no solved state (refused by the config check)
  plateau  the held-out score has not improved for `patience` evaluations in a row
  halving  successive halving over each setting's learning rates (core/halving.py): at
           each rung the worse learning rates stop, their other seeds never train

Either way the budget (train.steps) is the upper bound, and a model frozen by a
non-finite loss stops at once. The rule is evaluated on the fixed held-out batch every
`every` steps (one evaluation of all the group's models on device, one host read: never
a sync per step); a stopped model is frozen in place (its parameters are those it had at
its stop step), its curves end there, and the group ends when every model has stopped.
The rule's state (best score, evaluations since, stop step and reason per model) is
plain arrays, checkpointed with the group.
"""
from __future__ import annotations

import dataclasses

import numpy as np

RULES = ("none", "solved", "plateau", "halving")
REASONS = ("running", "budget", "solved", "plateau", "frozen", "halved")


def score(scaled_by: str, row: dict, counted: int) -> float:
  """The held-out score a rule watches, higher is better: the fraction of counted
  positions solved (n_star), sequence accuracy (size), minus the held-out loss (loss)."""
  if scaled_by == "n_star":
    return row["n_star"] / max(counted, 1)
  if scaled_by == "size":
    return row["seq_acc"]
  return -row["eval_loss"]


def solved(scaled_by: str, row: dict, counted: int, threshold: float) -> bool:
  if scaled_by == "n_star":
    return row["n_star"] >= counted
  if scaled_by == "size":
    return row["seq_acc"] >= threshold
  return False


@dataclasses.dataclass
class StopState:
  """Per model: the best score so far, evaluations since it improved, the step it
  stopped at (-1: running) and why (an index into REASONS)."""
  best: np.ndarray
  since: np.ndarray
  stopped_at: np.ndarray
  reason: np.ndarray

  @classmethod
  def fresh(cls, m: int) -> "StopState":
    return cls(best=np.full(m, -np.inf), since=np.zeros(m, np.int64),
               stopped_at=np.full(m, -1, np.int64), reason=np.zeros(m, np.int64))

  def as_tree(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_tree(cls, tree: dict) -> "StopState":
    return cls(**{k: np.asarray(v) for k, v in tree.items()})

  @property
  def running(self) -> np.ndarray:
    return self.stopped_at < 0

  def reason_of(self, i: int) -> str:
    return REASONS[int(self.reason[i])]


@dataclasses.dataclass(frozen=True)
class Rule:
  kind: str = "none"
  every: int = 0       # steps between evaluations
  patience: int = 5    # plateau: evaluations without improvement
  threshold: float = 0.95
  budget: int = 2**62  # a model's steps at most (train.steps; set by the group)
  eta: int = 3         # halving: keep the best 1/eta of the learning rates at each rung

  def update(self, st: StopState, items, scaled_by: str, counted: int) -> list[int]:
    """Decide from `items`: (model, its own step, its held-out row, frozen) for each
    model in training; returns the models that stop now (st is updated in place). A
    model at the end of its budget stops as "budget"."""
    now = []
    for i, step, row, frozen in items:
      s = score(scaled_by, row, counted)
      if s > st.best[i]:
        st.best[i], st.since[i] = s, 0
      else:
        st.since[i] += 1
      why = ("frozen" if frozen else
             "solved" if self.kind == "solved" and solved(scaled_by, row, counted,
                                                          self.threshold) else
             "plateau" if self.kind == "plateau" and st.since[i] >= self.patience else
             "budget" if step >= self.budget else None)
      if why:
        st.stopped_at[i], st.reason[i] = step, REASONS.index(why)
        now.append(i)
    return now

