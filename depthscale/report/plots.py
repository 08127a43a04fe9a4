"""A sweep's plots: n* against depth, width or repeats, held-out accuracy per position and
training curves, each written to plots/*.png (through io/atomic.py).

Works from fits and plain rows / group files; matplotlib's Agg canvas, no pyplot state;
never imports jax, core/ or model/. Each plot returns None, or why it was skipped.
"""
from __future__ import annotations

import math

import numpy as np
from matplotlib import cm, colors, ticker
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from depthscale.io import atomic
from depthscale.report import fits, sections

_fmt = sections.fmt


def _canvas():
  fig = FigureCanvasAgg(Figure(figsize=(6.4, 4.2))).figure
  return fig, fig.add_subplot()


def _save(fig, path: str) -> None:
  fig.tight_layout()
  atomic.write(path, lambda f: fig.savefig(f, format="png", dpi=110))


def scaling_data(axis: str, all_fit: dict, sets: list[dict]) -> dict | str:
  """What the n*-vs-`axis` plot draws, or why it is skipped: `seeds` [(x, n*, censored)]
  (each seed); `grown` [(x, n*)] (the seeds that grew past the grid's length); `lines` [{label, style, color, points: [(x, n*, censored)]}] (best and
  median per fit); `fits` [{label, color, x: (lo, hi), slope, intercept}], each drawn over
  the span of the points it used. Censored: n* = the length, a lower bound (fits.py)."""
  logged_y = axis in fits.LOG_AXES
  values = sorted({s.get(axis) for s in sets})
  if len(values) < 2:
    return f"skipped: a single {axis} ({_fmt(values[0]) if values else 'none'})"
  mine = [pair for key, pair in all_fit.items() if key.startswith(fits.NAMES[axis])]
  fitted = lambda s: any(all(s.get(k) == v for k, v in p["best"]["where"].items()) for p in mine)
  kept = [(s, n, g) for s in sets if fitted(s)
          for n, g in zip(s["n_star"], s.get("grew") or [False] * len(s["n_star"]))
          if not logged_y or n >= 1]
  if not kept:
    return "skipped: no model reached n* >= 1, so log2 n* is undefined"
  seeds = [(s[axis], n, bool(fits.is_censored(s, n))) for s, n, _ in kept]
  out = {"seeds": seeds, "grown": [(s[axis], n) for s, n, g in kept if g], "lines": [],
         "fits": [], "logged_y": logged_y, "values": values}
  for i, pair in enumerate(mine):
    color, tag = f"C{i}", ", ".join(f"{k}={v}" for k, v in pair["best"]["where"].items())
    for reduce, style in (("best", "o-"), ("median", "s--")):
      p = sorted((q[axis], q["n_star"], bool(q.get("censored"))) for q in pair[reduce]["points"])
      if p:
        out["lines"].append(dict(label=f"{reduce} seed {tag}".strip(), style=style,
                                 color=color, points=p))
    fit = pair["best"]
    used = [q[axis] for q in fit.get("points", []) if not q.get("censored")]
    if "slope" in fit and used and (not logged_y or fit["slope"] != 0):
      out["fits"].append(dict(label=f"fit (best), slope {fit['slope']:.2f}", color=color,
                              x=(min(used), max(used)), slope=fit["slope"],
                              intercept=fit["intercept"]))
  return out


def scaling(axis: str, all_fit: dict, sets: list[dict], path: str,
            measure: str = "n* (largest length at >= 95% accuracy)") -> str | None:
  """n* against depth or repeats (log2 n* axis) or width (log2 width axis): seeds, best,
  median, fit; a censored n* (= the length) as an open triangle, a lower bound; a seed
  that grew past the grid's length (train.length_max) ringed."""
  data = scaling_data(axis, all_fit, sets)
  if isinstance(data, str):
    return data
  _save(scaling_figure(axis, data, measure), path)
  return None


def scaling_figure(axis: str, data: dict, measure: str):
  """The figure of scaling_data's `data`."""
  logged_y = data["logged_y"]
  fig, ax = _canvas()
  _points(ax, data["seeds"], dict(s=12, color="0.6", alpha=0.6), "each seed")
  if data.get("grown"):
    ax.scatter(*zip(*data["grown"]), s=70, marker="o", facecolors="none", edgecolors="k",
               linewidths=0.8, label="grew past the grid's length")
  for line in data["lines"]:
    xs, ns, _ = zip(*line["points"])
    ax.plot(xs, ns, line["style"][1:], color=line["color"])
    _points(ax, line["points"], dict(s=22, color=line["color"], marker=line["style"][0]),
            line["label"])
  for fit in data["fits"]:
    lo, hi = fit["x"]
    grid = (np.linspace if logged_y else np.geomspace)(lo, hi, 50)
    curve = (2 ** ((grid - fit["intercept"]) / fit["slope"]) if logged_y
             else fit["slope"] * np.log2(grid) + fit["intercept"])
    ax.plot(grid, curve, ":", color=fit["color"], label=fit["label"])
  if any(c for _, _, c in data["seeds"]):
    ax.scatter([], [], marker="^", facecolors="none", edgecolors="0.3",
               label="n* = the length: a lower bound")
  (ax.set_yscale if logged_y else ax.set_xscale)("log", base=2)
  logged = [n for _, n, _ in data["seeds"]] if logged_y else data["values"]
  subs = (1.0,) if math.log2(max(logged) / min(logged)) > 4 else (1, 1.25, 1.5, 1.75)
  scale = ax.yaxis if logged_y else ax.xaxis
  scale.set_major_locator(ticker.LogLocator(2, subs=subs))
  scale.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
  scale.set_minor_formatter(ticker.NullFormatter())
  # depth, repeats and n* are integers: no tick at 1.5
  (ax.xaxis if logged_y else ax.yaxis).set_major_locator(ticker.MaxNLocator(integer=True))
  ax.set_xlabel(axis)
  ax.set_ylabel(measure)
  ax.legend(fontsize=7)
  return fig


def _points(ax, points, style: dict, label: str) -> None:
  """Measured points filled; censored ones (lower bounds) as open upward triangles."""
  full = [(x, n) for x, n, c in points if not c]
  cens = [(x, n) for x, n, c in points if c]
  if full:
    ax.scatter(*zip(*full), label=label, **style)
  if cens:
    open_style = {k: v for k, v in style.items() if k not in ("marker", "color")}
    ax.scatter(*zip(*cens), marker="^", facecolors="none", edgecolors=style["color"],
               label=None if full else label, **open_style)


def _depth_colors(depths):
  lo, hi = min(depths), max(depths)
  norm = colors.Normalize(lo, hi if hi > lo else lo + 1)
  return cm.ScalarMappable(norm=norm, cmap="viridis")


def positions(groups, rows, path: str) -> str | None:
  """Held-out accuracy per position of each setting's best seed, coloured by depth."""
  pairs = [(r, a) for g in groups for r, a in zip(g["rows"], g.get("per_position_acc") or [])
           if r.get("n_star") is not None]  # a model halved before it trained: nothing
  pairs.sort(key=lambda ra: fits.seed_rank(ra[0]))
  best = {fits.setting_key(r): (r, a) for r, a in pairs}     # better seeds overwrite
  models = sorted(best.values(), key=lambda ra: ra[0]["depth"])
  if not models:
    return "skipped: no groups/*.json with per_position_acc"
  vary = [k for k in ("width", "heads", "lr", "length") if len({r.get(k) for r in rows}) > 1]
  sm = _depth_colors([r["depth"] for r, _ in models])
  fig, ax = _canvas()
  for row, acc in models:
    tag = "".join(f", {k}={_fmt(row.get(k))}" for k in vary)
    ax.plot(np.arange(1, len(acc) + 1), np.asarray(acc, float), color=sm.to_rgba(row["depth"]),
            label=f"depth {row['depth']}{tag} (seed {row.get('seed')}, n*={row['n_star']})")
  ax.axhline(0.95, color="0.5", ls=":", lw=1)
  ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
  ax.set_xlabel("position")
  ax.set_ylabel("held-out accuracy (best seed)")
  ax.legend(fontsize=6)
  _save(fig, path)
  return None


def curves(groups, path: str) -> tuple[str | None, list[str]]:
  """Training loss against step of every model, coloured by depth; also notes on groups
  whose curves do not match their rows."""
  lines, notes = [], []
  for g in groups:
    loss = (g.get("curves") or {}).get("loss") or []
    if len(loss) != len(g["rows"]):
      notes.append(f"group {g['id']}: {len(loss)} loss curves for {len(g['rows'])} models")
      continue
    for row, curve in zip(g["rows"], loss):
      step = g["curves"].get("step") or list(range(1, len(curve) + 1))
      if len(step) != len(curve):
        notes.append(f"group {g['id']}: {len(step)} steps for {len(curve)} losses")
        break
      lines.append((row["depth"], step, np.asarray(curve, float)))    # null -> NaN
  if not lines:
    return "skipped: no training curves in groups/*.json", notes
  sm = _depth_colors([d for d, _, _ in lines])
  fig, ax = _canvas()
  for depth, step, curve in lines:
    ax.plot(step, curve, color=sm.to_rgba(depth), alpha=0.6, lw=1)
  if all((c[np.isfinite(c)] > 0).all() for _, _, c in lines):
    ax.set_yscale("log")
  fig.colorbar(sm, ax=ax, label="depth", ticks=ticker.MaxNLocator(integer=True))
  ax.set_xlabel("step")
  ax.set_ylabel("training loss")
  _save(fig, path)
  return None, notes
