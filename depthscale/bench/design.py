"""The `design` bench preset: an adaptive study against the grid and three fixed rules,
replayed on a pool trained once (bench/data/: its results.csv and how it was made).

The truth is the cell-mean slope on the whole pool (report/cell_law.py). Each of
REPLAYS replays draws the grid's GRID_SEEDS seeds per cell from the pool's, and every
rule spends up to the grid's compute on the pool's models (design_replay.py). Printed
per rule: the slope's root mean square error against the truth at 25, 50, 75 and 100%
of the grid's compute, how often its 95% interval holds the truth, how often its claims'
verdicts equal the pool's, and the smallest share at which its error is no larger than
the full grid's. Beside them, the study `run` makes at each of BUDGETS (not a prefix: its
reserve binds before its end): its error, coverage, verdicts (against the pool's and the
grid's drawn in the same replay), and the smallest budget that reaches the grid's error.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
from typing import Callable

import numpy as np

from depthscale import config as config_lib
from depthscale.bench import design_replay as replay
from depthscale.bench import registry

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POOL = "khop_pool"
REPLAYS, GRID_SEEDS = 200, 4
SHARES = tuple(round(0.05 * i, 2) for i in range(1, 21))
REPORTED = (0.25, 0.5, 0.75, 1.0)
BUDGETS = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)  # the studies `run` makes, replayed


def _num(v):
  try:
    f = float(v)
  except (TypeError, ValueError):
    return v if v != "" else None
  return int(f) if f.is_integer() and "." not in str(v) and "e" not in str(v) else f


def load_pool(name: str = POOL):
  """(Pool, meta, config): the pool's rows by cell (its swept axis, depth) and seed."""
  from depthscale.sweep import plan
  with open(os.path.join(DATA, f"{name}.json")) as f:
    meta = json.load(f)
  with open(os.path.join(DATA, f"{name}.csv")) as f:
    rows = [{k: _num(v) for k, v in r.items()} for r in csv.DictReader(f)]
  c = config_lib.load(os.path.join(ROOT, meta["config"]), meta["overrides"])
  xs = sorted({r["depth"] for r in rows})
  by = [sorted([r for r in rows if r["depth"] == x], key=lambda r: r["seed"]) for x in xs]
  cap = [math.log2(max(r.get("measured_length") or r["length"] for r in g)) for g in by]
  y = [[math.log2(max(r["n_star"], 1)) for r in g] for g in by]
  cens = [[r["n_star"] >= (r.get("measured_length") or r["length"]) for r in g] for g in by]
  cost = [plan.step_flops(g[0]["depth"], g[0]["width"], 1, g[0]["length"],
                          c.train.batch_size) * c.train.steps for g in by]
  return replay.Pool(x=xs, y=y, censored=cens, rows=by, cap=cap, cost=cost), meta, c


def _verdicts(c):
  """Claims' verdicts of a subset of the pool's rows, judged as an adaptive study judges
  them: undecided (None) while a depth of the grid has no model."""
  from depthscale.report import claims, fits
  grid = {"design": {"kind": "adaptive"}, "grid": {"depth": list(c.grid.depth)}}
  def of(rows):
    got = claims.check(c.report.claims, rows, [], fits.all_fits(rows, B=100), {},
                       c.eval.threshold, claims.unmeasured_depths(grid, rows))
    return tuple(x["holds"] for x in got)
  return of


def run_design(replays: int | None = None, log: Callable[[str], None] = print,
               settings=None, pool_name: str = POOL) -> dict:
  """The replay's JSON: {"pool", "truth", "rules": {name: {rmse_by_share, ...}}}
  (REPLAYS replays unless `replays`)."""
  replays = replays or REPLAYS
  from depthscale.report import cell_law, design
  pool, meta, c = load_pool(pool_name)
  s = settings or design.Settings()
  every = [(ci, m) for ci in range(len(pool.x)) for m in range(len(pool.y[ci]))]
  truth = cell_law.fit(replay.cells_of(pool, every))
  verdict_of = _verdicts(c)
  truth_v = verdict_of([pool.rows[ci][m] for ci, m in every])
  per = {r: [] for r in replay.RULES}
  budgets = sorted(set(BUDGETS) | {s.budget})
  own = {b: [] for b in budgets}  # the adaptive study `run` makes, at each budget
  for i in range(replays):
    rng = np.random.default_rng(i)
    order = [list(rng.permutation(len(ys))) for ys in pool.y]
    grid_cost = GRID_SEEDS * float(np.sum(pool.cost))
    for rule in replay.RULES:
      seq = replay.sequence(rule, pool, order, GRID_SEEDS, rng, s)
      per[rule].append(replay.evaluate(pool, seq, SHARES, grid_cost, truth["slope"],
                                       verdict_of, truth_v))
    grid_v = verdict_of([pool.rows[c][m] for c, m in replay.grid_models(order, GRID_SEEDS)])
    for b in budgets:
      own[b].append(replay.at_budget(pool, order, GRID_SEEDS,
                                     dataclasses.replace(s, budget=b), truth["slope"],
                                     verdict_of, truth_v, grid_v))
    if (i + 1) % 50 == 0:
      log(f"bench design: {i + 1}/{replays} replays")
  rules = {r: summarize(per[r]) for r in replay.RULES}
  ad = rules["adaptive"]
  ad["at_budgets"] = {str(b): _own_summary(own[b], b) for b in budgets}
  ad["at_budget"] = ad["at_budgets"][str(s.budget)]
  grid_rmse = rules["grid_order"]["rmse_by_share"]["1.0"]
  for r in rules.values():
    r["share_to_grid"] = next((sh for sh in SHARES if r["rmse_all"][str(sh)] <= grid_rmse),
                              1.0)
  ad["budget_to_grid"] = next((b for b in budgets if ad["at_budgets"][str(b)]["rmse"]
                               <= grid_rmse), None)
  n_cens = sum(sum(cc) for cc in pool.censored)
  out = dict(pool=dict(meta, models=len(every), censored=n_cens, depths=pool.x),
             truth=dict(slope=truth["slope"], ci95=truth["ci95"], verdicts=truth_v),
             replays=replays, grid_seeds=GRID_SEEDS, settings=vars(s), rules=rules)
  for line in table(out):
    log(line)
  return out


def _own_summary(own: list[dict], budget: float) -> dict:
  """The studies of one budget over the replays: compute spent, rmse, coverage, verdicts
  (against the pool's and the same replay's grid's), claims decided."""
  err = np.array([o["err"] for o in own], float)
  mean = lambda k: float(np.mean([o[k] for o in own]))
  return dict(budget=budget, spent=mean("spent"),
              rmse=float(np.sqrt(np.nanmean(err ** 2))) if np.isfinite(err).any() else math.inf,
              no_slope=int(np.isnan(err).sum()), coverage=mean("covered"),
              verdicts=mean("verdicts"), verdicts_as_grid=mean("as_grid"),
              decided=mean("decided"))


def run_preset(log) -> dict:
  """The preset: the replay, its table, and its plot where the command runs (PLOT)."""
  out = run_design(log=log)
  out["plot"] = plot(out, os.path.abspath(PLOT))
  log(f"bench design: plot {out['plot']}")
  return out


PLOT = "design_replay.png"  # written where the command runs


def table(result: dict) -> list[str]:
  """Per rule and share: rmse, coverage, verdicts, median half width of the interval."""
  out = [f"truth (the pool's slope): {result['truth']['slope']:.4f}; {result['replays']} "
         f"replays of {result['grid_seeds']} grid seeds per depth",
         f"{'rule':11s} {'share':>5s} {'rmse':>7s} {'coverage':>8s} {'verdicts':>8s} "
         f"{'half CI':>8s}  grid's error at"]
  for name, r in result["rules"].items():
    for k in r["rmse_by_share"]:
      out.append(f"{name:11s} {float(k):5.2f} {r['rmse_by_share'][k]:7.4f} "
                 f"{r['coverage_by_share'][k]:8.3f} {r['verdicts_by_share'][k]:8.3f} "
                 f"{r['half_width_by_share'][k]:8.4f}  {r['share_to_grid']:.2f}")
  ad = result["rules"]["adaptive"]
  if ad.get("at_budgets"):
    reserve = "one model kept at every depth" if result["settings"].get("reserve") else \
        "no reserve"
    out.append(f"the study `run` makes at each budget ({reserve}; the default "
               f"{ad['at_budget']['budget']:g}):")
    out.append(f"{'budget':>7s} {'spent':>6s} {'rmse':>7s} {'coverage':>8s} {'verdicts':>8s} "
               f"{'as grid':>8s} {'decided':>8s}")
    for own in ad["at_budgets"].values():
      out.append(f"{own['budget']:7.2f} {own['spent']:6.3f} {own['rmse']:7.4f} "
                 f"{own['coverage']:8.3f} {own['verdicts']:8.3f} "
                 f"{own['verdicts_as_grid']:8.3f} {own['decided']:8.3f}")
    b = ad.get("budget_to_grid")
    out.append("the grid's error at budget " + (f"{b:g}" if b is not None else
                                                 f"> {max(BUDGETS):g}"))
  return out


def plot(result: dict, path: str) -> str:
  """Each rule's slope error (rmse over replays) and median interval half width against
  the share of the grid's compute spent."""
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure
  fig = Figure(figsize=(6.4, 4))
  FigureCanvasAgg(fig)
  ax = fig.add_subplot()
  for name, r in result["rules"].items():
    xs = [float(k) for k in r["rmse_all"]]
    ys = [v if math.isfinite(v) else math.nan for v in r["rmse_all"].values()]
    line, = ax.plot(xs, ys, marker="o", ms=3, label=f"{name}: rmse")
    hw = r["half_width_by_share"]
    ax.plot([float(k) for k in hw], [v if math.isfinite(v) else math.nan for v in hw.values()],
            ls="--", color=line.get_color(), label=f"{name}: median 95% half width")
  ax.set_xlabel("share of the grid's compute")
  ax.set_ylabel("slope error (depth per doubling of n*)")
  ax.set_yscale("log")
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  return path


def summarize(runs: list[list[dict]]) -> dict:
  """Over replays, per share: rmse (a replay with no slope counts as missing), coverage
  (a replay with no interval does not hold the truth), verdicts, median half width."""
  out = {"rmse_all": {}, "rmse_by_share": {}, "coverage_by_share": {},
         "verdicts_by_share": {}, "half_width_by_share": {}, "no_slope_by_share": {}}
  for j, sh in enumerate(SHARES):
    at = [r[j] for r in runs]
    err = np.array([a["err"] for a in at], float)
    ok = np.isfinite(err)
    rmse = float(np.sqrt(np.mean(err[ok] ** 2))) if ok.any() else math.inf
    out["rmse_all"][str(sh)] = rmse if ok.all() else math.inf
    if sh in REPORTED:
      k = str(sh)
      out["rmse_by_share"][k] = rmse
      out["coverage_by_share"][k] = float(np.mean([a["covered"] for a in at]))
      out["verdicts_by_share"][k] = float(np.mean([a["verdicts"] for a in at]))
      out["no_slope_by_share"][k] = int((~ok).sum())
      hw = [a.get("half_width", math.inf) for a in at]
      out["half_width_by_share"][k] = float(np.median(hw))
  out["verdicts_match"] = min(out["verdicts_by_share"].values())
  return out


def _recorded(name: str = POOL) -> dict | None:
  """The recorded replay (data/<pool>_replay.json, written by `depthscale bench --preset
  design --json ...`), or None if none is kept."""
  path = os.path.join(DATA, f"{name}_replay.json")
  if not os.path.isfile(path):
    return None
  with open(path) as f:
    return json.load(f)


def replay_share(name: str = POOL) -> float | None:
  """The adaptive rule's share_to_grid in the recorded replay, or None."""
  got = _recorded(name)
  return None if got is None else float(got["rules"]["adaptive"]["share_to_grid"])


def plan_line(grid_s: float, budget: float, reserve: bool = True) -> str:
  """`plan`'s line for an adaptive study: the grid's training time, its budget's, and
  what the replay's adaptive rule needed to match the grid's slope error."""
  got = _recorded()
  share = None if got is None else float(got["rules"]["adaptive"]["share_to_grid"])
  seen = (f"; in the replay (bench --preset design) the adaptive rule matched the full "
          f"grid's slope error at {share:.2f} of its compute: about {_dur(share * grid_s)}"
          if share is not None else "")
  if got is not None and got["settings"].get("reserve") == reserve:
    ad, grid_rmse = got["rules"]["adaptive"], got["rules"]["grid_order"]["rmse_by_share"]["1.0"]
    own = (ad.get("at_budgets") or {}).get(str(budget))
    kept = ", one model kept for every depth" if reserve else ", no depth kept"
    if own:
      seen += (f" (a study of budget {budget:g}{kept}: error {own['rmse']:.3f} against the "
               f"grid's {grid_rmse:.3f})")
    b = ad.get("budget_to_grid")
    if b is not None and budget < b:
      seen += (f"; the study `run` makes matched the grid's error from budget {b:g} "
               f"(--config.design.budget={b:g})")
  return (f"adaptive design: the grid above trains in {_dur(grid_s)}; the design spends at "
          f"most its budget, {budget:g} of it ({_dur(budget * grid_s)}){seen}")


def _dur(s: float) -> str:
  return f"{s / 3600:.3g} h" if s >= 3600 else f"{s / 60:.3g} min"


def design_summary(result: dict) -> str:
  parts = []
  for name, r in result["rules"].items():
    rm = ", ".join(f"{v:.3f}" for v in r["rmse_by_share"].values())
    cov = min(r["coverage_by_share"].values())
    parts.append(f"{name}: rmse {rm} at 25/50/75/100%, coverage >= {cov:.2f}, verdicts "
                 f"{r['verdicts_match']:.2f}, grid's error at {r['share_to_grid']:.2f}")
  return f"truth slope {result['truth']['slope']:.3f}; " + "; ".join(parts)


registry.register("design", lambda o, log: run_preset(log), design_summary)
