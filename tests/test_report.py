"""build_report on fake workdirs made up from known laws: report.md carries fits.py's
numbers, fits.json round-trips all_fits, plots are real PNGs, missing data is said."""
import csv
import glob
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from depthscale.io import workdir as workdir_lib
from depthscale.report import all_fits, build_report, settings

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PAPER = {"kind": "depth", "slope": 4.8, "intercept": -15.8, "r2": 0.93,
         "source": "Merrill & Sabharwal 2025"}
PLOTS = ("nstar_vs_depth.png", "nstar_vs_width.png", "accuracy_per_position.png",
         "training_curves.png")


def _rows(depths=(2, 3, 4, 5), widths=(32, 64, 128), seeds=3, length=40):
  """Depth sweep at width 64 and width sweep at depth 2; n* from the papers' laws."""
  rng, rows = np.random.default_rng(0), []
  cells = [(d, 64) for d in depths] + [(2, w) for w in widths if w != 64]
  for d, w in cells:
    for s in range(seeds):
      n = 2 ** ((d + 15.8) / 4.8 - 2) + (7.2 * math.log2(w) - 36) + rng.normal(0, 1)
      rows.append(dict(task="parity", depth=d, width=w, heads=w // 32, seed=s, lr=1e-3,
                       length=length, repeats=1, n_star=int(np.clip(round(n), 0, length)),
                       final_loss=float(rng.uniform(0.01, 1)),
                       eval_loss=float(rng.uniform(0.01, 1)), seq_acc=float(rng.uniform()),
                       steps=50, frozen=bool(s == 2 and d == 5), train_s=12.5))
  return rows


def _write_workdir(path, rows, config, groups=True, csv_file=True):
  os.makedirs(path / "groups", exist_ok=True)
  (path / "config.json").write_text(json.dumps(config))
  if csv_file:
    with open(path / "results.csv", "w", newline="") as f:
      writer = csv.DictWriter(f, fieldnames=list(rows[0]))
      writer.writeheader()
      writer.writerows(rows)
  if not groups:
    return
  plan = []  # a group per depth, as plan.json lists them (results are the plan's groups)
  for d in sorted({r["depth"] for r in rows}):
    members = [dict(r, model=f"d{r['depth']}-w{r['width']}-s{r['seed']}") for r in rows
               if r["depth"] == d]
    plan.append({"id": f"d{d}", "cells": [r["model"] for r in members]})
    length = members[0]["length"]
    pos = np.arange(length)
    acc = [np.where(pos < r["n_star"], 1.0, 0.5 + 0.4 * np.exp(-(pos - r["n_star"]))).tolist()
           for r in members]
    steps = list(range(10, 60, 10))
    loss = [[2.0 * math.exp(-0.01 * r["depth"] * t) for t in steps] for r in members]
    for r, curve in zip(members, loss):
      if r["frozen"]:
        curve[-1] = None                                   # a diverged model's NaN, as null
    group = {"rows": members, "curves": {"loss": loss, "accuracy": loss, "step": steps},
             "per_position_acc": acc, "format": workdir_lib.FORMAT}
    (path / "groups" / f"d{d}.json").write_text(json.dumps(group))
  (path / "plan.json").write_text(json.dumps({"groups": plan}))


def _is_png(path):
  with open(path, "rb") as f:
    return os.path.getsize(path) > len(PNG_MAGIC) and f.read(8) == PNG_MAGIC


def test_report_carries_the_fits_and_plots(tmp_path):
  rows = _rows()
  _write_workdir(tmp_path, rows, {"name": "parity sweep", "task": "parity", "paper_fit": PAPER})
  path = build_report(str(tmp_path))
  assert path == str(tmp_path / "report.md")
  md = open(path).read()
  want = all_fits(rows)
  with open(tmp_path / "fits.json") as f:
    saved = json.load(f)
  assert saved["fits"] == want and saved["settings"] == settings(rows)
  assert set(want) == {"depth_vs_log2_nstar", "nstar_vs_log2_width"}
  for pair in want.values():
    for fit in pair.values():
      assert f"{fit['slope']:.3f}" in md and f"{fit['intercept']:.3f}" in md
      lo, hi = fit["ci95"]["slope"]
      assert f"[{lo:.3f}, {hi:.3f}]" in md
  assert "# parity sweep" in md and f"- models: {len(rows)} " in md
  assert "total train time: 50.0 s" in md                 # 4 groups of 12.5 s each
  assert "paper (depth)" in md and "4.800" in md and "-15.800" in md
  assert "best-seed 95% interval of `depth_vs_log2_nstar`" in md
  for name in PLOTS:
    assert _is_png(tmp_path / "plots" / name), name
    assert f"(plots/{name})" in md
  assert not glob.glob(str(tmp_path / "**" / ".tmp-*"), recursive=True)


def test_no_paper_fit_no_paper_row(tmp_path):
  _write_workdir(tmp_path, _rows(), {"name": "x", "task": "parity"})
  md = open(build_report(str(tmp_path))).read()
  assert "paper" not in md and "published" not in md


def test_single_width_skips_its_plot_and_says_so(tmp_path):
  rows = [r for r in _rows() if r["width"] == 64]
  _write_workdir(tmp_path, rows, {"name": "depth only", "task": "parity",
                                  "paper_fit": dict(PAPER, kind="width")})
  md = open(build_report(str(tmp_path))).read()
  assert not (tmp_path / "plots" / "nstar_vs_width.png").exists()
  assert "nstar vs width: skipped: a single width (64)" in md
  assert "but this sweep has no such fit" in md
  assert _is_png(tmp_path / "plots" / "nstar_vs_depth.png")
  assert "nstar_vs_log2_width" not in json.loads((tmp_path / "fits.json").read_text())["fits"]


def test_results_csv_alone(tmp_path):
  rows = _rows()
  _write_workdir(tmp_path, rows, {"name": "csv", "task": "parity"}, groups=False)
  md = open(build_report(str(tmp_path))).read()
  assert json.loads((tmp_path / "fits.json").read_text())["fits"] == all_fits(rows)
  assert "rows from results.csv" in md
  assert "accuracy per position: skipped" in md and "training curves: skipped" in md
  assert _is_png(tmp_path / "plots" / "nstar_vs_width.png")


def test_rows_with_zero_nstar_are_counted(tmp_path):
  rows = _rows()
  for r in rows[:2]:
    r["n_star"] = 0
  _write_workdir(tmp_path, rows, {"name": "z", "task": "parity"})
  build_report(str(tmp_path))
  fit = json.loads((tmp_path / "fits.json").read_text())["fits"]["depth_vs_log2_nstar"]["best"]
  assert fit["dropped"] == 2


def test_empty_workdir_is_a_clear_error(tmp_path):
  with pytest.raises(FileNotFoundError, match="neither results.csv nor groups"):
    build_report(str(tmp_path))


def test_report_package_does_not_import_jax():
  code = "import sys, depthscale.report; assert 'jax' not in sys.modules, 'jax imported'"
  subprocess.run([sys.executable, "-c", code], check=True)


def test_the_nstar_plot_marks_a_censored_point_and_fits_over_the_others():
  """Depth 4 reaches the full length (n* = 24 for every seed): a lower bound. The plot
  draws it open, the fitted line spans depths 1-3 only, and depth ticks are integers."""
  from depthscale.report import plots
  rows = [dict(task="khop", depth=d, width=32, heads=2, seed=s, lr=1e-3, length=24,
               repeats=1, n_star=min(24, 2 ** d + s), frozen=False)
          for d in (1, 2, 3, 4) for s in (0, 1)]
  rows = [dict(r, n_star=24) if r["depth"] == 4 else r for r in rows]
  data = plots.scaling_data("depth", all_fits(rows), settings(rows))
  for line in data["lines"]:  # best and median
    assert [(x, c) for x, _, c in line["points"]] == [(1, False), (2, False), (3, False),
                                                     (4, True)], line
  assert {(x, c) for x, _, c in data["seeds"]} == {(1, False), (2, False), (3, False),
                                                   (4, True)}
  (fit,) = data["fits"]
  assert fit["x"] == (1, 3)
  fig = plots.scaling_figure("depth", data, "n*")
  ax = fig.axes[0]
  fig.canvas.draw()
  ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
  assert ticks and all(float(t).is_integer() for t in ticks), ticks
  open_markers = [c for c in ax.collections if len(c.get_offsets())
                  and (c.get_facecolor().size == 0 or c.get_facecolor()[0][3] == 0)]
  assert any((4.0, 24.0) in map(tuple, c.get_offsets()) for c in open_markers)


def test_the_nstar_plot_rings_the_models_that_grew():
  """A growth study (grid length 24, length_max 96): depth 4's seeds grew (trained at 96:
  n* 92 measured, and 96 solved up to `measured_length`); depth 3's seed 1 grew to 48 and
  stopped there; the rest stayed at 24. Exactly the grown seeds are ringed."""
  from depthscale.report import plots
  n = {(1, 0): 6, (1, 1): 6, (2, 0): 7, (2, 1): 7, (3, 0): 10, (3, 1): 30, (4, 0): 92,
       (4, 1): 96}
  trained = {(3, 1): 48, (4, 0): 96, (4, 1): 96}
  rows = [dict(task="khop", depth=d, width=32, heads=2, seed=s, lr=1e-3, length=24,
               repeats=1, n_star=n[d, s], trained_length=trained.get((d, s), 24),
               measured_length=96, frozen=False) for d in (1, 2, 3, 4) for s in (0, 1)]
  sets = settings(rows)
  assert [s["grew"] for s in sets] == [[False, False], [False, False], [False, True],
                                       [True, True]]
  data = plots.scaling_data("depth", all_fits(rows), sets)
  assert sorted(data["grown"]) == [(3, 30), (4, 92), (4, 96)]
  assert {(x, n, c) for x, n, c in data["seeds"]} >= {(4, 96, True), (4, 92, False)}
  fig = plots.scaling_figure("depth", data, "n*")
  (ring,) = [c for c in fig.axes[0].collections
             if c.get_label() == "grew past the grid's length"]
  assert sorted(map(tuple, ring.get_offsets().tolist())) == [(3.0, 30.0), (4.0, 92.0),
                                                             (4.0, 96.0)]
  rows = [dict(r, trained_length=24) for r in rows]  # nothing grew: no ring, no legend
  data = plots.scaling_data("depth", all_fits(rows), settings(rows))
  assert data["grown"] == []
  labels = [c.get_label() for c in plots.scaling_figure("depth", data, "n*").axes[0].collections]
  assert "grew past the grid's length" not in labels


def test_status_and_report_show_a_one_sided_bound_where_no_slope_is_fitted():
  """An adaptive design whose deepest cell's models all reached their length: `status` and
  the report's rounds table show the fit's one-sided bound (report/cell_law.slope_bound)."""
  from depthscale.report import cell_law, sections
  from depthscale.sweep import status
  cells = [cell_law.Cell(1, (2.0, 2.3, 2.1, 1.9), (False,) * 4),
           cell_law.Cell(2), cell_law.Cell(3, (4.0, 4.0), (True, True), cap=4.0)]
  fit = cell_law.fit(cells)
  assert "error" in fit and fit["slope_max"] > 0 and fit["ci95"] == [0.0, fit["slope_max"]]
  # the bound by hand: depth 1's mean + t(3) se, depth 3's bound - sigma z(1 - 0.025^(1/2))
  s2 = np.var([2.0, 2.3, 2.1, 1.9], ddof=1)
  high = 2.075 + 3.182 * math.sqrt(s2 / 4)
  from scipy import stats
  low = 4.0 - math.sqrt(s2) * stats.norm.ppf(1 - math.sqrt(0.025))  # its sigma: depth 1's
  assert fit["slope_max"] == pytest.approx(2 / (low - high), rel=1e-3)
  d = dict(fit=fit, target=0, spent=0.3, budget=0.6, stop=None, rounds=1, chosen=6)
  line = status.design_line(d, dict(pending=1, running=0, stale=0))
  assert f"no slope yet, at most {fit['slope_max']:.3g}" in line
  table = sections.design_rounds([dict(round=1, spent=0.3, fit=fit, stop=None, picks=[])])
  assert any(f"≤ {fit['slope_max']:.3g} (one-sided)" in row for row in table)
