"""An adaptive study's decisions, from recorded results alone: the first round, then at
each round barrier the fit, the scores and the next picks, or the reason to stop.

The same function decides in a live study (sweep/design_rounds.py, at a barrier) and in
the replay benchmark (bench/design.py), so what the replay measures is what `run` does.
Compute is the planner's price of each cell's model (seconds, or FLOPs in a replay);
the budget is a share of the grid's (every cell x grid.seed). Pure numpy; no jax.
"""
from __future__ import annotations

import dataclasses

from depthscale.report import cell_law, design_rule


@dataclasses.dataclass(frozen=True)
class Settings:
  """design.* as the rule reads it (config/design.py holds the fields and their checks)."""
  budget: float = 0.6        # share of the grid's compute
  max_seeds: int = 10        # models per cell at most
  stop_ci: float = 0.0       # stop when the slope's 95% interval is this narrow (relative)
  first: tuple = ()          # axis values of the first round (() = the two ends)
  first_seeds: int = 2       # seeds per first-round cell
  round_size: int = 8        # models per later round
  explore: float = 0.25      # share of a round's picks kept for cells far from the line
  reserve: bool = True       # one model at every unmeasured cell kept in the budget


def first_cells(x_all, s: Settings) -> list[int]:
  """The first round's cells, each once per seed: `first` or the two ends (they carry a
  straight line's slope; the middle is the explore picks' first call); seed by seed, the
  ends first (a round cut short still spans the axis)."""
  xs = list(x_all)
  want = list(s.first) or [xs[0], xs[-1]]
  want = sorted(dict.fromkeys(want), key=lambda v: (v not in (xs[0], xs[-1]), xs.index(v)))
  return [xs.index(v) for _ in range(s.first_seeds) for v in want]


def decide(cells: list[cell_law.Cell], cost, grid_cost: float, spent: float,
           s: Settings) -> dict:
  """The decision at a barrier: {"fit", "picks": [{"cell", "score", "why"}], "stop"}.
  `stop` is None, "budget" (no pick fits in what is left) or "interval" (stop_ci met)."""
  fit = cell_law.fit(cells)
  out = {"fit": fit, "picks": [], "stop": None}
  if s.stop_ci > 0 and "error" not in fit and fit["rel_width"] <= s.stop_ci:
    return dict(out, stop="interval")
  left = s.budget * grid_cost - spent
  seeds = [len(c.y) for c in cells]
  picks = design_rule.pick(fit, [c.cap for c in cells], cost, seeds,
                           size=s.round_size, max_seeds=s.max_seeds, explore=s.explore)
  owed = {c for c, n in enumerate(seeds) if n == 0} if s.reserve else set()
  return dict(out, **_within_budget(picks, cost, owed, left, grid_cost))


def _within_budget(picks, cost, unmeasured: set, left: float, grid_cost: float) -> dict:
  """The picks the budget pays for, in their order, one model at every unmeasured cell
  reserved: a pick there is paid while it fits what is left, any other only while what is
  left beyond the reserve pays for it (the claims are undecided while a cell of the grid
  has no model; a budget too small for the whole reserve measures what it can)."""
  unmeasured = set(unmeasured)
  kept = []
  for p in picks:
    c = p["cell"]
    reserve = 0.0 if c in unmeasured else sum(cost[u] for u in unmeasured)
    if cost[c] <= left - reserve + 1e-9 * grid_cost:
      kept.append(p)
      left -= cost[c]
      unmeasured.discard(c)
  return dict(picks=kept, stop=None if kept else "budget")
