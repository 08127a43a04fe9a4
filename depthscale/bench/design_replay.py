"""Replays of a trained pool: each rule spends compute on the pool's models (a result is
read, not trained), and its slope is scored against the pool's own (the truth).

A pool is, per cell of the swept axis, its models in a fixed order of seeds (Pool). One
replay draws, per cell, an order of the pool's seeds; the grid's seeds are the first
`grid_seeds` of it, and a rule that wants more seeds at a cell takes the next. Rules:
  adaptive    report/design.py: the first round, then a decision at every barrier
  grid_order  the grid's own order (cells in axis order, their grid seeds)
  random      uniform over the pool's cells and seeds
  ends        the two end cells in turn, their seeds in order (the textbook design for a
              straight line)
Each rule yields its models in the order it would train them; its estimate at a share s
of the grid's compute is the fit of the longest prefix that costs at most s.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from depthscale.report import cell_law, design

RULES = ("adaptive", "grid_order", "random", "ends")


@dataclasses.dataclass(frozen=True)
class Pool:
  """x per cell; per cell its models' log2 n*, censored flags and rows; the censoring
  cap (log2 length) and the compute of one model per cell."""
  x: list
  y: list            # [cell][model]
  censored: list     # [cell][model]
  rows: list         # [cell][model] result rows (for the claims)
  cap: list
  cost: list


def cells_of(pool: Pool, taken) -> list[cell_law.Cell]:
  """The cells as a design sees them, from (cell, model) pairs taken so far."""
  out = []
  for c, x in enumerate(pool.x):
    idx = [m for cc, m in taken if cc == c]
    out.append(cell_law.Cell(x=x, y=tuple(pool.y[c][m] for m in idx),
                             censored=tuple(pool.censored[c][m] for m in idx),
                             cap=pool.cap[c]))
  return out


def _seq_adaptive(pool, order, grid_cost, s: design.Settings, full: bool = True):
  """The adaptive study's models in training order: of budget 1.0 (read by prefixes) or,
  `full` false, the study `run` makes at `s`'s own budget."""
  taken, spent = [], 0.0
  used = [0] * len(pool.x)

  def take(cells):
    nonlocal spent
    for c in cells:
      if used[c] < len(order[c]):
        taken.append((c, order[c][used[c]]))
        used[c] += 1
        spent += pool.cost[c]
  take(design.first_cells(pool.x, s))
  s = dataclasses.replace(s, budget=1.0 if full else s.budget, stop_ci=0.0,
                          max_seeds=min(s.max_seeds, min(len(o) for o in order)))
  while True:
    d = design.decide(cells_of(pool, taken), pool.cost, grid_cost, spent, s)
    if d["stop"]:
      break
    take([p["cell"] for p in d["picks"]])
  return taken


def grid_models(order, grid_seeds: int):
  """The grid's (cell, model) pairs of a replay, in its order: each cell's first
  `grid_seeds` seeds of `order`."""
  return [(c, o[i]) for c, o in enumerate(order) for i in range(grid_seeds)]


def sequence(rule: str, pool: Pool, order, grid_seeds: int, rng, s: design.Settings):
  """The (cell, model) pairs `rule` trains, in its order, up to the grid's compute."""
  C = len(pool.x)
  grid_cost = grid_seeds * float(np.sum(pool.cost))
  if rule == "adaptive":
    return _seq_adaptive(pool, order, grid_cost, s)
  if rule == "grid_order":
    return grid_models(order, grid_seeds)
  if rule == "random":
    every = [(c, m) for c in range(C) for m in order[c]]
    return [every[i] for i in rng.permutation(len(every))]
  if rule == "ends":
    ends = [0, C - 1]
    n = min(len(order[0]), len(order[-1]))
    return [(c, order[c][i]) for i in range(n) for c in ends]
  raise ValueError(f"unknown rule {rule!r}; valid: {', '.join(RULES)}")


def at_budget(pool: Pool, order, grid_seeds: int, s: design.Settings, truth: float,
              verdict_of, truth_verdicts, grid_verdicts) -> dict:
  """The study `run` makes at `s`'s budget (not a prefix of one of budget 1.0: its
  reserve binds before its end): its `score`, compute spent, whether it decided every
  claim, and whether its verdicts equal `grid_verdicts`, those of the grid drawn in the
  same replay (`grid_models`; the live comparison: the pool's verdicts may rest on seeds
  the grid never draws)."""
  grid_cost = grid_seeds * float(np.sum(pool.cost))
  taken = _seq_adaptive(pool, order, grid_cost, s, full=False)
  verdicts = verdict_of([pool.rows[c][m] for c, m in taken])
  return dict(score(pool, taken, truth, verdict_of, truth_verdicts),
              spent=sum(pool.cost[c] for c, _ in taken) / grid_cost,
              decided=all(v is not None for v in verdicts),
              as_grid=verdicts == grid_verdicts)


def prefix(seq, cost, budget: float):
  """The longest prefix of `seq` whose compute is at most `budget`."""
  spent, out = 0.0, []
  for c, m in seq:
    spent += cost[c]
    if spent > budget * (1 + 1e-12):
      break
    out.append((c, m))
  return out


def score(pool: Pool, taken, truth: float, verdict_of, truth_verdicts) -> dict:
  """The fit of the models `taken`: the slope's error, whether its 95% interval (or,
  with no slope, its one-sided bound) holds the truth, whether the claims' verdicts equal
  the pool's, and the interval's half width."""
  f = cell_law.fit(cells_of(pool, taken))
  if "error" in f or not math.isfinite(f["slope"]):  # no slope; at most a one-sided bound
    bound = f.get("slope_max")
    return dict(err=math.nan, verdicts=False, covered=bound is not None and truth <= bound)
  lo, hi = f["ci95"]
  rows = [pool.rows[c][m] for c, m in taken]
  return dict(err=f["slope"] - truth, covered=bool(lo <= truth <= hi),
              verdicts=verdict_of(rows) == truth_verdicts,
              half_width=(hi - lo) / 2 if math.isfinite(hi - lo) else math.inf)


def evaluate(pool: Pool, seq, shares, grid_cost: float, truth: float, verdict_of,
             truth_verdicts) -> list[dict]:
  """Per share: `score` of the longest prefix of `seq` that costs at most the share."""
  return [dict(share=share, **score(pool, prefix(seq, pool.cost, share * grid_cost), truth,
                                    verdict_of, truth_verdicts)) for share in shares]
