"""The design section: which models a study trains. `grid` (every cell x grid.seed, the
default) or `adaptive` (report/design.py: a first round, then at each round barrier the
seeds that shrink the depth law's interval most per unit of compute, up to a budget).
Part of a workdir's identity, as the plan's fields are."""
from __future__ import annotations

import ml_collections

from depthscale.config.base import ConfigError, choice, number
from depthscale.config.fields import field, one_of, section

KINDS = ("grid", "adaptive")


def add(c: ml_collections.ConfigDict) -> None:
  section(c, "design", "which models the study trains: the whole grid, or an adaptive design")
  field(c, "design.kind", "grid", f"{one_of(KINDS)}: every cell x grid.seed, or seeds "
        "placed where the depth law's interval shrinks most per unit of compute")
  field(c, "design.budget", 0.6, "adaptive: the compute it may spend, a share in (0, 1] of "
        "the grid's (the planner's price of every cell x grid.seed)")
  field(c, "design.max_seeds", 10, "adaptive: models per cell at most (at least grid.seed's "
        "count; seeds past the grid's continue from its largest)")
  field(c, "design.stop_ci", 0.0, "adaptive: stop once the slope's 95% interval is this "
        "narrow relative to the slope (0: spend the budget)")
  field(c, "design.first", [], "adaptive: the first round's depths, each of grid.depth ([]: "
        "the two ends)")
  field(c, "design.first_seeds", 2, "adaptive: seeds per first-round depth")
  field(c, "design.round_size", 8, "adaptive: models chosen at each round barrier")
  field(c, "design.explore", 0.25, "adaptive: the share of a round's picks kept for depths "
        "with few seeds or far from the fitted line (a law that bends shows it)")
  field(c, "design.reserve", True, "adaptive: keep one model at every unmeasured depth in "
        "the budget, so the claims are decided (false: all of it where the slope's "
        "variance shrinks most; its error is smaller, its claims undecided while a depth "
        "has no model)")


def settings(c):
  """design.* as report/design.Settings (the rule's view)."""
  from depthscale.report.design import Settings
  d = c.design
  return Settings(budget=float(d.budget), max_seeds=int(d.max_seeds), stop_ci=float(d.stop_ci),
                  first=tuple(d.first), first_seeds=int(d.first_seeds),
                  round_size=int(d.round_size), explore=float(d.explore),
                  reserve=bool(d.reserve))


def check(c) -> None:
  """design.* checked; an adaptive design also against the grid it places seeds on."""
  if choice(c, "design.kind", KINDS) == "grid":
    return
  g = c.grid
  if len(g.depth) < 2:
    raise ConfigError(f"design.kind=adaptive fits depth against log2 n*: grid.depth "
                      f"{list(g.depth)} has one value, so there is no law to target; give "
                      "at least 2 depths (3 or more to see it bend)")
  for axis in ("width", "lr", "length", "repeats"):
    if len(g[axis]) > 1:
      raise ConfigError(f"design.kind=adaptive places seeds along one depth law: grid.{axis} "
                        f"has {len(g[axis])} values; give one (or design.kind=grid)")
  budget = number(c, "design.budget", 0.0, strict=True)
  if budget > 1:
    raise ConfigError(f"design.budget: {budget!r} is a share of the grid's compute; give a "
                      "number in (0, 1]")
  seeds = number(c, "design.max_seeds", 1, integer=True)
  if seeds < len(g.seed):
    raise ConfigError(f"design.max_seeds: {seeds} is below the grid's {len(g.seed)} seeds "
                      f"(grid.seed); give at least {len(g.seed)}")
  number(c, "design.stop_ci", 0.0)
  first_seeds = number(c, "design.first_seeds", 1, integer=True)
  if first_seeds > seeds:
    raise ConfigError(f"design.first_seeds: {first_seeds} is more than design.max_seeds "
                      f"({seeds}); give at most {seeds}")
  number(c, "design.round_size", 1, integer=True)
  explore = number(c, "design.explore", 0.0)
  if explore >= 1:
    raise ConfigError(f"design.explore: {explore!r} leaves no pick for the slope; give a "
                      "share in [0, 1)")
  if not isinstance(c.design.reserve, bool):
    raise ConfigError(f"design.reserve: {c.design.reserve!r} is not true or false")
  _check_first(c, budget)


def _check_first(c, budget: float) -> None:
  from depthscale.report import design
  from depthscale.sweep.plan import step_flops
  depths, first = list(c.grid.depth), list(c.design.first)
  off = [d for d in first if d not in depths]
  if off or len(set(first)) != len(first):
    raise ConfigError(f"design.first: {first} names depth(s) not on the grid or twice "
                      f"({', '.join(map(str, off)) or 'a repeat'}); give each of grid.depth "
                      f"{depths} at most once")
  g = c.grid
  cost = [step_flops(d, g.width[0], g.repeats[0], g.length[0], c.train.batch_size)
          for d in depths]
  share = (sum(cost[i] for i in design.first_cells(depths, settings(c)))
           / (len(g.seed) * sum(cost)))
  if share > budget + 1e-9:
    raise ConfigError(f"design.budget: {budget:g} of the grid's compute is less than the "
                      f"first round's {share:.2f}; raise it, or give fewer design.first "
                      "depths or design.first_seeds")
