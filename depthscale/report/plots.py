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


def scaling(axis: str, all_fit: dict, sets: list[dict], path: str,
            measure: str = "n* (largest length at >= 95% accuracy)") -> str | None:
  """n* against depth or repeats (log2 n* axis) or width (log2 width axis): seeds, best,
  median, fit."""
  logged_y = axis in fits.LOG_AXES
  values = sorted({s.get(axis) for s in sets})
  if len(values) < 2:
    return f"skipped: a single {axis} ({_fmt(values[0]) if values else 'none'})"
  mine = [pair for key, pair in all_fit.items() if key.startswith(fits.NAMES[axis])]
  fitted = lambda s: any(all(s.get(k) == v for k, v in p["best"]["where"].items()) for p in mine)
  pts = [(s[axis], n) for s in sets if fitted(s) for n in s["n_star"] if not logged_y or n >= 1]
  if not pts:
    return "skipped: no model reached n* >= 1, so log2 n* is undefined"
  fig, ax = _canvas()
  ax.scatter(*zip(*pts), s=12, color="0.6", alpha=0.6, label="each seed")
  for i, pair in enumerate(mine):
    color, tag = f"C{i}", ", ".join(f"{k}={v}" for k, v in pair["best"]["where"].items())
    for reduce, style in (("best", "o-"), ("median", "s--")):
      p = sorted((q[axis], q["n_star"]) for q in pair[reduce]["points"])
      if p:
        ax.plot(*zip(*p), style, color=color, ms=4, label=f"{reduce} seed {tag}".strip())
    fit = pair["best"]
    if "slope" in fit and (not logged_y or fit["slope"] != 0):
      grid = (np.linspace if logged_y else np.geomspace)(min(values), max(values), 50)
      curve = (2 ** ((grid - fit["intercept"]) / fit["slope"]) if logged_y
               else fit["slope"] * np.log2(grid) + fit["intercept"])
      ax.plot(grid, curve, ":", color=color, label=f"fit (best), slope {fit['slope']:.2f}")
  (ax.set_yscale if logged_y else ax.set_xscale)("log", base=2)
  logged = [n for _, n in pts] if logged_y else values
  subs = (1.0,) if math.log2(max(logged) / min(logged)) > 4 else (1, 1.25, 1.5, 1.75)
  scale = ax.yaxis if logged_y else ax.xaxis
  scale.set_major_locator(ticker.LogLocator(2, subs=subs))
  scale.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
  scale.set_minor_formatter(ticker.NullFormatter())
  ax.set_xlabel(axis)
  ax.set_ylabel(measure)
  ax.legend(fontsize=7)
  _save(fig, path)
  return None


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
  fig.colorbar(sm, ax=ax, label="depth")
  ax.set_xlabel("step")
  ax.set_ylabel("training loss")
  _save(fig, path)
  return None, notes
