"""Successive halving over each setting's learning rates (`train.stop=halving`).

A setting is a model's shape and hyperparameters but its seed and learning rate. Its
first seed at each learning rate is a scout; the scouts hold the group's slots from step
0 (a group with halving has exactly one slot per scout). At each rung (the budget over
eta**r for r = R..1, R = ceil(log_eta(number of learning rates)), rounded down to a
multiple of the evaluation interval), the setting's learning rates still in play are
ranked by their scouts' held-out score (core/stopping.score; a frozen scout scores
-inf; a tie goes to the learning rate listed first); the best max(1, n // eta) go on,
the others are halved: their scout stops there (its row and curves are those of that
step) and their other seeds never train (rows with trained_steps 0, stop "halved" and
no outcomes). After the last rung the survivors' other seeds take the freed slots, in
spec order, and train the whole budget. As ASHA across jobs, within one program.

Every scout meets the rungs at the same own steps, so the decisions depend on the
models only, not on the slots, devices or group.
"""
from __future__ import annotations

import math

from depthscale.core import stopping


def setting(spec) -> tuple:
  """What the learning rates of a setting share: everything but the seed and lr."""
  return (spec.depth, spec.width, spec.heads, spec.repeats, spec.weight_decay, spec.warmup)


def n_rungs(n_lrs: int, eta: int) -> int:
  """R: the rungs that take n_lrs learning rates down to one, eta-fold each."""
  r, n = 0, n_lrs
  while n > 1:
    n, r = max(1, n // eta), r + 1
  return r


def rung_steps(n_lrs: int, eta: int, budget: int, every: int) -> list[int]:
  """The own steps of the rungs, earliest first (each a multiple of `every`, > 0)."""
  return [budget // eta**r // every * every for r in range(n_rungs(n_lrs, eta), 0, -1)]


class Ladder:
  """The scouts and rungs of a group's models (specs, in spec order)."""

  def __init__(self, specs, eta: int, budget: int, every: int):
    self.eta = eta
    self.lrs: dict = {}        # setting -> its learning rates, in order of appearance
    self.members: dict = {}    # (setting, lr) -> spec indices, in spec order
    for i, s in enumerate(specs):
      lrs = self.lrs.setdefault(setting(s), [])
      if s.lr not in lrs:
        lrs.append(s.lr)
      self.members.setdefault((setting(s), s.lr), []).append(i)
    self.family = [(setting(s), s.lr) for s in specs]
    self.scouts = sorted(v[0] for v in self.members.values())
    most = max(len(v) for v in self.lrs.values())
    self.rungs = rung_steps(most, eta, budget, every)
    if any(r <= 0 for r in self.rungs):
      raise ValueError(f"halving over {most} learning rates needs steps >= {eta**len(self.rungs)}"
                       f" x the evaluation interval ({every})")

  def eligible(self, i: int, at: int) -> bool:
    """Whether model i may take a free slot at group step `at` (a scout always; another
    seed after the last rung, if its learning rate survived: the caller checks that)."""
    return i in self.scouts or not self.rungs or at >= self.rungs[-1]

  def decide(self, at: int, score: dict, out: set) -> list:
    """At group step `at` (a rung, else nothing): the (setting, lr) halved now, given
    each scout's score (model -> float) and the (setting, lr) already out."""
    if at not in self.rungs:
      return []
    halved = []
    for key, lrs in self.lrs.items():
      live = [lr for lr in lrs if (key, lr) not in out]
      if len(live) <= 1:
        continue
      keep = max(1, len(live) // self.eta)
      ranked = sorted(live, key=lambda lr: -score.get(self.members[(key, lr)][0], -math.inf))
      halved += [(key, lr) for lr in ranked[keep:]]
    return halved

  def halve(self, st, at: int, held: dict, entered, scaled_by: str, counted: int) -> list:
    """Successive halving at group step `at`, given the held-out rows of the models in
    slots (`held`: model -> row) and when each entered (`entered`, group steps): the
    models in slots that stop now. `st` (core.stopping.StopState) is updated: a halved
    learning rate's scout stops at its own step, its queued seeds at 0."""
    out = {self.family[i] for i in range(len(self.family)) if st.reason_of(i) == "halved"}
    score = {i: stopping.score(scaled_by, held[i], counted) for i in self.scouts
             if i in held and st.running[i]}
    now = []
    for fam in self.decide(at, score, out):
      for i in self.members[fam]:
        if not st.running[i]:
          continue
        st.stopped_at[i] = at - entered[i] if i in held else 0
        st.reason[i] = stopping.REASONS.index("halved")
        if i in held:
          now.append(i)
    return now
