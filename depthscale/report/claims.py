"""A study's claims, checked against this run: each `{"kind", "claim", "paper", ...}` of
the study's `report.claims` becomes `{"claim", "paper", "measured", "holds"}`.

A kind names a check on plain result rows (and curves, fits, companion runs); the study
config says which checks its paper's claims are and with what numbers. Never imports jax.
"""
from __future__ import annotations

import math
import statistics

from depthscale.report import fits

LOWER_IS_BETTER = ("eval_loss", "final_loss")


def _num(v) -> str:
  return f"{v:.3g}" if isinstance(v, float) else str(v)


def best_by(rows, axis: str, measure: str, where=None) -> dict:
  """{axis value: the best `measure` over seeds (and any other varying field)} of the rows
  matching `where`; the lowest for losses, the largest otherwise."""
  pick = min if measure in LOWER_IS_BETTER else max
  out: dict = {}
  for r in rows:
    if any(r.get(k) != v for k, v in (where or {}).items()) or r.get(measure) is None:
      continue
    a = r.get(axis)
    out[a] = r[measure] if a not in out else pick(out[a], r[measure])
  return dict(sorted(out.items()))


def median_by(rows, axis: str, measure: str) -> dict:
  """{axis value: the median `measure` over the rows at it (its seeds)}."""
  out: dict = {}
  for r in rows:
    if r.get(measure) is not None:
      out.setdefault(r.get(axis), []).append(r[measure])
  return {a: float(statistics.median(v)) for a, v in sorted(out.items())}


def _listing(table: dict, axis: str) -> str:
  return ", ".join(f"{axis} {a}: {_num(v)}" for a, v in table.items())


def crossings(curve_steps, partials_P_S, below: float) -> list[int | None]:
  """Per partial loss (in chain order) the first logged step at which it is < `below`."""
  out = []
  for curve in partials_P_S:
    hit = [s for s, v in zip(curve_steps, curve) if v is not None and v < below]
    out.append(hit[0] if hit else None)
  return out


def partial_curves(groups) -> list[tuple[dict, list[int], list[list]]]:
  """(row, logged steps, [partial_loss_1 curve, partial_loss_2 curve, ...]) per model."""
  out = []
  for g in groups:
    curves = g.get("curves") or {}
    names = sorted((k for k in curves if k.startswith("partial_loss_")),
                   key=lambda k: int(k.rsplit("_", 1)[1]))
    for i, row in enumerate(g["rows"]):
      if names:
        out.append((row, curves.get("step", []), [curves[n][i] for n in names]))
  return out


def at_full_length(rows, axis: str, where=None) -> str:
  """"; n* = the full length (a lower bound) at depth 1, 2" for the axis values where a
  model's n* reached its length (only "at least this" is known there); "" if none."""
  vals = sorted({r.get(axis) for r in rows
                 if all(r.get(k) == v for k, v in (where or {}).items())
                 and isinstance(r.get("n_star"), (int, float)) and fits.is_censored(r, r["n_star"])})
  return (f"; n* = the full length (a lower bound) at {axis} {', '.join(map(str, vals))}"
          if vals else "")


def _loss_above(ctx, c):
  table = best_by(ctx["rows"], "depth", "eval_loss")
  low = min(r["eval_loss"] for r in ctx["rows"])
  return (f"held-out loss, best seed: {_listing(table, 'depth')}; lowest of "
          f"{len(ctx['rows'])} models {low:.3g}"), low > c["value"]


def _loss_below(ctx, c):
  table = best_by(ctx["rows"], "depth", "eval_loss")
  solved = [d for d, v in table.items() if v < c["value"]]
  return (f"held-out loss, best seed: {_listing(table, 'depth')}; below {c['value']:g} at "
          f"depths {solved or 'none'}"), bool(solved)


def in_chain_order(cross) -> bool:
  """The positions that crossed are x_1..x_j (a prefix), at non-decreasing steps."""
  hit = [s for s in cross if s is not None]
  return all(s is not None for s in cross[:len(hit)]) and hit == sorted(hit)


def _partials_in_order(ctx, c):
  below = c.get("below", 0.5)
  models = partial_curves(ctx["groups"])
  cross = [crossings(steps, partials, below) for _, steps, partials in models]
  two = [x for x in cross if sum(s is not None for s in x) >= 2]
  if not two:
    return (f"no model had two partial losses below {below:g} ({len(models)} models)", False)
  order = sum(in_chain_order(x) for x in two)
  return (f"{order} of {len(two)} models with two or more partial losses below {below:g} "
          f"crossed in chain order ({len(models)} models in all)"), order == len(two)


def _improves(ctx, c):
  """The best `measure` over seeds improves along `axis` (n* up, a loss down): the last
  value beats the first and no step is worse by more than `tol` (default 0)."""
  axis, measure, tol = c["axis"], c.get("measure", "n_star"), c.get("tol", 0)
  rows = ctx["size_rows"] if measure == "size_star" else ctx["rows"]
  table = best_by(rows, axis, "n_star" if measure == "size_star" else measure, c.get("where"))
  sign = -1 if measure in LOWER_IS_BETTER else 1
  vals = [sign * v for v in table.values()]
  ok = (len(vals) >= 2 and all(b >= a - tol for a, b in zip(vals, vals[1:]))
        and vals[-1] > vals[0])
  capped = at_full_length(rows, axis, c.get("where")) if measure == "n_star" else ""
  return f"best {measure} by {axis}: {_listing(table, axis)}{capped}", ok


def _khop_bound(ctx, c):
  k_max = c["k_max"]
  table = best_by(ctx["rows"], "depth", "k_star", c.get("where"))
  need = {d: min(2 ** (d - 2), k_max) for d in table if d >= 2}
  ok = bool(need) and all(table[d] >= k for d, k in need.items())
  return (f"hardest k solved (best seed): {_listing(table, 'depth')}; 2 + ceil(log2 k) "
          f"layers allow k <= {', '.join(f'{k} at depth {d}' for d, k in need.items())}"), ok


def _fit_slope_positive(ctx, c):
  name = fits.NAMES[c["axis"]]
  mine = [(k, p["best"]) for k, p in ctx["fits"].items() if k.startswith(name)]
  ok = [(k, f) for k, f in mine if "error" not in f]
  if not ok:
    why = "; ".join(f"`{k}`: {f['error']}" for k, f in mine) or "the grid has one value"
    return f"no {c['axis']} fit ({why})", False
  mine = ok
  key, f = mine[0]
  lo, hi = (f.get("ci95") or {}).get("slope") or (math.nan, math.nan)
  r2 = "–" if f["r2"] is None else f"{f['r2']:.2f}"
  return (f"`{key}` (best seed): slope {f['slope']:.3g}, 95% CI [{lo:.3g}, {hi:.3g}], "
          f"r² {r2}"), bool(lo > 0)


def _gain(table: dict) -> float:
  vals = list(table.values())
  return vals[-1] - vals[0] if len(vals) >= 2 else math.nan


def _companion_gains(ctx, c):
  """(measured, mine, theirs) of a claim against companion run `c["companion"]`: the best
  measure by axis of this study and of it, in words and as tables (None: not found)."""
  name, axis, measure = c["companion"], c.get("axis", "depth"), c.get("measure", "n_star")
  other = ctx["companions"].get(name)
  if other is None:
    return f"companion run {name!r} not found (run the study to the end)", None, None
  mine, theirs = best_by(ctx["rows"], axis, measure), best_by(other, axis, measure)
  cap = (lambda rs: at_full_length(rs, axis)) if measure == "n_star" else (lambda rs: "")
  return (f"best {measure} by {axis}: this study {_listing(mine, axis)} (gain "
          f"{_num(_gain(mine))}{cap(ctx['rows'])}); {name} {_listing(theirs, axis)} (gain "
          f"{_num(_gain(theirs))}{cap(other)})"), mine, theirs


def _more_than_companion(ctx, c):
  measured, mine, theirs = _companion_gains(ctx, c)
  if mine is None:
    return measured, False
  first = lambda t: next(iter(t.values()), math.nan)
  return measured, bool(_gain(mine) > _gain(theirs) and first(theirs) >= first(mine))


def _both_improve(ctx, c):
  """Both this study and the companion gain along the axis (deepest minus shallowest
  best): each needs more of it for longer sequences at this scale."""
  measured, mine, theirs = _companion_gains(ctx, c)
  if mine is None:
    return measured, False
  return measured, bool(_gain(mine) > 0 and _gain(theirs) > 0)


def _at_least_companion(ctx, c):
  """The companion is solved at least as far as this study at every value of `axis`, by
  the median over seeds (a control that fails at random on some seeds does not hold)."""
  name, axis, measure = c["companion"], c.get("axis", "depth"), c.get("measure", "n_star")
  other = ctx["companions"].get(name)
  if other is None:
    return f"companion run {name!r} not found (run the study to the end)", False
  mine, theirs = median_by(ctx["rows"], axis, measure), median_by(other, axis, measure)
  ok = bool(mine) and set(mine) <= set(theirs) and all(theirs[a] >= v for a, v in mine.items())
  return (f"median {measure} by {axis}: this study {_listing(mine, axis)}; {name} "
          f"{_listing(theirs, axis)}"), ok


def _beats_companion(ctx, c):
  name, measure = c["companion"], c.get("measure", "n_star")
  other = ctx["companions"].get(name)
  if other is None:
    return f"companion run {name!r} not found (run the study to the end)", False
  mine = max((r[measure] for r in ctx["rows"]
              if all(r.get(k) == v for k, v in c.get("where", {}).items())), default=None)
  theirs = max((r[measure] for r in other
                if all(r.get(k) == v for k, v in c.get("companion_where", {}).items())),
               default=None)
  if mine is None or theirs is None:
    return "no rows match", False
  return f"best {measure}: this study {mine}, {name} {theirs}", mine > theirs


KINDS = {"loss_above": _loss_above, "loss_below": _loss_below,
         "partials_in_order": _partials_in_order, "improves": _improves, "khop_bound": _khop_bound,
         "fit_slope_positive": _fit_slope_positive,
         "more_than_companion": _more_than_companion, "beats_companion": _beats_companion,
         "both_improve": _both_improve, "at_least_companion": _at_least_companion}


PARTIAL_SOLVED = 0.5  # a chain position is solved when its held-out partial loss is below


def positions_solved(row: dict, below: float = PARTIAL_SOLVED) -> int | None:
  """Leading chain positions x_1..x_j whose held-out partial loss is < `below` (None for
  rows without partial losses)."""
  losses, i = [], 1
  while f"eval_partial_loss_{i}" in row:
    losses.append(row[f"eval_partial_loss_{i}"])
    i += 1
  if not losses:
    return None
  return next((j for j, v in enumerate(losses) if v is None or v >= below), len(losses))


REQUIRED = {"loss_above": ("value",), "loss_below": ("value",), "partials_in_order": (),
            "improves": ("axis",), "khop_bound": ("k_max",), "fit_slope_positive": ("axis",),
            "more_than_companion": ("companion",), "beats_companion": ("companion",),
            "both_improve": ("companion",), "at_least_companion": ("companion",)}


def check_spec(claims, companions) -> None:
  """A one-line ValueError for a claim the report could not check (unknown kind, a
  missing field, a companion the study does not run)."""
  for i, c in enumerate(claims):
    kind = c.get("kind") if isinstance(c, dict) else None
    if kind not in KINDS:
      raise ValueError(f"report.claims[{i}]: kind {kind!r}; valid: {', '.join(KINDS)}")
    missing = [k for k in ("claim",) + REQUIRED[kind] if k not in c]
    if missing:
      raise ValueError(f"report.claims[{i}] ({kind}): give {', '.join(missing)}")
    if "axis" in c and c["axis"] not in ("depth", "width", "repeats", "length"):
      raise ValueError(f"report.claims[{i}]: axis {c['axis']!r}; valid: depth, width, "
                       "repeats, length")
    if "companion" in c and c["companion"] not in companions:
      raise ValueError(f"report.claims[{i}]: companion {c['companion']!r} is not in "
                       f"report.companions ({', '.join(companions) or 'none'})")


def check(claims, rows, groups, all_fit, companions, threshold: float,
          unmeasured=()) -> list[dict]:
  """The study's claims checked on this run, as claims.json holds them. `unmeasured`:
  depths of the grid with no model (an adaptive design's): each claim is then undecided
  ("holds": None), not judged on the depths there are."""
  rows = [{**r, "positions_solved": positions_solved(r)} for r in rows]
  ctx = dict(rows=rows, groups=groups, fits=all_fit, companions=companions,
             size_rows=fits.size_rows(rows, threshold))
  out = []
  for c in claims:
    c = dict(c)
    if c.get("kind") not in KINDS:
      raise ValueError(f"report.claims: unknown kind {c.get('kind')!r}; valid: "
                       f"{', '.join(KINDS)}")
    measured, holds = KINDS[c["kind"]](ctx, c)
    holds = bool(holds)
    if unmeasured:
      measured += (f" (undecided: depth {', '.join(map(str, unmeasured))} not trained, "
                   "where the grid has it)")
      holds = None
    out.append({"claim": c["claim"], "paper": c.get("paper", ""), "measured": measured,
                "holds": holds})
  return out


def unmeasured_depths(config: dict, rows) -> list:
  """An adaptive study's grid depths with no model among `rows` (none for a grid)."""
  if (config.get("design") or {}).get("kind", "grid") != "adaptive":
    return []
  have = {r.get("depth") for r in rows}
  return [d for d in (config.get("grid") or {}).get("depth") or [] if d not in have]

