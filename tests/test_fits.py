"""Scaling-law fits: least squares against scipy.stats.linregress, known laws recovered
within their bootstrap intervals, best vs median seeds by hand, degenerate inputs."""
import math

import numpy as np
import pytest
from scipy import stats

from depthscale.report import fits


def _row(depth, width, seed, n_star, **extra):
  return dict(task="a5", depth=depth, width=width, heads=max(width // 64, 1), seed=seed,
              lr=1e-4, length=512, repeats=1, steps=1000, n_star=int(n_star),
              final_loss=0.1, eval_loss=0.2, seq_acc=0.5, frozen=False, train_s=1.0, **extra)


def _depth_law_rows(depths=(6, 9, 12, 15, 18, 21, 24), seeds=5, sigma=0.3, width=512, rng=0):
  """n* = 2^((d + 15.8) / 4.8), each seed multiplied by 2^N(0, sigma^2), rounded."""
  rng = np.random.default_rng(rng)
  return [_row(d, width, s, round(2 ** ((d + 15.8) / 4.8 + rng.normal(0, sigma))))
          for d in depths for s in range(seeds)]


def _width_law_rows(widths=(128, 256, 512, 1024, 2048), seeds=4, sigma=1.5, depth=6, rng=3):
  """n* = 7.2 log2(w) - 41.7, each seed plus N(0, sigma^2), rounded."""
  rng = np.random.default_rng(rng)
  return [_row(depth, w, s, round(7.2 * math.log2(w) - 41.7 + rng.normal(0, sigma)))
          for w in widths for s in range(seeds)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_line_matches_linregress(seed):
  rng = np.random.default_rng(seed)
  x = rng.uniform(0, 10, 12)
  y = 2.5 * x - 3 + rng.normal(0, 2, 12)
  fit, ref = fits.fit_line(x, y), stats.linregress(x, y)
  assert fit["n"] == 12
  np.testing.assert_allclose(fit["slope"], ref.slope, rtol=1e-12)
  np.testing.assert_allclose(fit["intercept"], ref.intercept, rtol=1e-12)
  np.testing.assert_allclose(fit["r2"], ref.rvalue**2, rtol=1e-12)


def test_fit_line_exact_and_degenerate():
  exact = fits.fit_line([1, 2, 4], [3, 5, 9])
  assert exact["slope"] == pytest.approx(2) and exact["intercept"] == pytest.approx(1)
  assert exact["r2"] == pytest.approx(1)
  flat = fits.fit_line([1, 2, 3], [7, 7, 7])
  assert flat["slope"] == 0 and flat["intercept"] == pytest.approx(7) and flat["r2"] is None
  for x in ([], [3], [3, 3, 3]):
    out = fits.fit_line(x, [1.0] * len(x))
    assert "error" in out and "distinct x" in out["error"] and "slope" not in out
  with pytest.raises(ValueError):
    fits.fit_line([1, 2], [1, 2, 3])


# Percentile intervals over 3-5 seeds cover the true slope ~90% (best) to ~95% (median)
# of the time; the data seeds are fixed, so these checks are deterministic.
@pytest.mark.parametrize("reduce", ["best", "median"])
def test_depth_law_slope_within_bootstrap_interval(reduce):
  fit = fits.depth_vs_log_nstar(_depth_law_rows(), reduce)
  lo, hi = fit["ci95"]["slope"]
  assert lo <= 4.8 <= hi and lo <= fit["slope"] <= hi
  assert hi - lo < 2.5                                   # informative, not vacuous
  assert fit["bootstrap_over"] == "seeds" and fit["B"] == 1000 == fit["B_valid"]
  assert fit["n"] == 7 and fit["dropped"] == 0 and fit["r2"] > 0.9
  assert fit["ci95"]["intercept"][0] <= fit["intercept"] <= fit["ci95"]["intercept"][1]


@pytest.mark.parametrize("reduce", ["best", "median"])
def test_width_law_slope_within_bootstrap_interval(reduce):
  fit = fits.nstar_vs_log_width(_width_law_rows(), reduce)
  lo, hi = fit["ci95"]["slope"]
  assert lo <= 7.2 <= hi and hi - lo < 3
  if reduce == "median":                                 # the best seed is biased upwards
    assert fit["ci95"]["intercept"][0] <= -41.7 <= fit["ci95"]["intercept"][1]


def test_best_and_median_pick_the_right_points_by_hand():
  rows = ([_row(2, 64, s, n) for s, n in enumerate([4, 8, 16])]
          + [_row(4, 64, s, n) for s, n in enumerate([0, 8, 32, 64, 2])])
  best, median = fits.depth_vs_log_nstar(rows, "best"), fits.depth_vs_log_nstar(rows, "median")
  assert best["dropped"] == median["dropped"] == 1     # the n* = 0 seed at depth 4
  assert [(p["depth"], p["n_star"], p["seeds"]) for p in best["points"]] == [(2, 16, 3),
                                                                                (4, 64, 4)]
  assert [p["n_star"] for p in median["points"]] == [8, 20]   # median of 2, 8, 32, 64
  assert best["slope"] == pytest.approx(1) and best["intercept"] == pytest.approx(-2)
  assert median["slope"] == pytest.approx(2 / (math.log2(20) - 3))
  with pytest.raises(ValueError):
    fits.depth_vs_log_nstar(rows, "mean")


def test_bootstrap_over_points_with_one_seed_and_deterministic():
  rows = _depth_law_rows(seeds=1)
  a, b = fits.depth_vs_log_nstar(rows, B=200), fits.depth_vs_log_nstar(rows, B=200)
  assert a == b and a["bootstrap_over"] == "points" and a["B"] == 200
  assert a["ci95"]["slope"][0] <= a["slope"] <= a["ci95"]["slope"][1]


def test_identical_seeds_give_a_zero_width_interval():
  rows = [_row(d, 64, s, 2 ** (d // 2)) for d in (2, 4, 8) for s in range(3)]
  fit = fits.depth_vs_log_nstar(rows, "median")
  assert fit["slope"] == pytest.approx(2)
  assert fit["ci95"]["slope"] == pytest.approx([2, 2])


def test_degenerate_grids_give_errors_not_exceptions():
  one_depth = [_row(6, 64, s, 10 + s) for s in range(3)]
  assert "error" in fits.depth_vs_log_nstar(one_depth)
  assert "error" in fits.nstar_vs_log_width(one_depth)
  assert fits.all_fits(one_depth) == {}
  all_zero = [_row(d, 64, 0, 0) for d in (2, 4, 6)]
  out = fits.depth_vs_log_nstar(all_zero)
  assert "error" in out and out["dropped"] == 3 and out["points"] == []
  assert "error" in fits.all_fits(all_zero)["depth_vs_log2_nstar"]["best"]


def test_all_fits_on_the_papers_design_holds_the_other_axis_fixed():
  rows = _depth_law_rows(seeds=3) + _width_law_rows(widths=(128, 256, 1024), seeds=3)
  out = fits.all_fits(rows, B=100)
  assert set(out) == {"depth_vs_log2_nstar", "nstar_vs_log2_width"}
  depth, width = out["depth_vs_log2_nstar"], out["nstar_vs_log2_width"]
  assert set(depth) == set(width) == {"best", "median"}
  assert depth["best"]["where"] == {"heads": 8, "width": 512} and depth["best"]["n"] == 7
  assert width["median"]["where"] == {"depth": 6}        # heads move with width
  assert sorted(p["width"] for p in width["best"]["points"]) == [128, 256, 512, 1024]
  assert depth["best"] == fits.depth_vs_log_nstar(
      [r for r in rows if r["width"] == 512], "best", B=100) | {"where": depth["best"]["where"]}


def test_all_fits_on_a_product_grid_fits_each_slice():
  rows = [_row(d, w, s, 2 ** (d // 2) + s) for d in (2, 4, 6) for w in (64, 128)
          for s in range(2)]
  out = fits.all_fits(rows, B=50)
  assert set(out) == {"depth_vs_log2_nstar[heads=1,width=64]",
                      "depth_vs_log2_nstar[heads=2,width=128]",
                      "nstar_vs_log2_width[depth=2]", "nstar_vs_log2_width[depth=4]",
                      "nstar_vs_log2_width[depth=6]"}
  assert out["nstar_vs_log2_width[depth=4]"]["best"]["slope"] == pytest.approx(0)


def test_settings_summarise_seeds():
  rows = [_row(2, 64, s, n) for s, n in enumerate([5, 1, 3])] + [_row(4, 64, 0, 9)]
  out = fits.settings(rows)
  assert [(s["depth"], s["seeds"], s["n_star"], s["best"], s["median"]) for s in out] == [
      (2, [0, 1, 2], [5, 1, 3], 5, 3.0), (4, [0], [9], 9, 9.0)]


def test_n_star_at_the_full_length_is_a_lower_bound_left_out_of_the_fit():
  # Best n* by depth: 4, 8, 16 and then 32 = the length (censored: "at least 32").
  rows = [dict(_row(d, 64, s, n), length=32) for d, s, n in
          [(1, 0, 4), (1, 1, 3), (2, 0, 8), (2, 1, 8), (3, 0, 16), (3, 1, 9), (4, 0, 32),
           (4, 1, 20)]]
  fit = fits.depth_vs_log_nstar(rows, "best")
  # Fitted on depths 1-3 only: log2 n* = 2, 3, 4 -> depth = log2 n* - 1 exactly.
  assert fit["slope"] == pytest.approx(1) and fit["intercept"] == pytest.approx(-1)
  assert [(p["depth"], p.get("censored", False)) for p in fit["points"]] == [
      (1, False), (2, False), (3, False), (4, True)]
  assert fit["n"] == 3 and fit["censored"] == [dict(depth=4, n_star=32, seeds=2, length=32)]
  assert "measured (32) at depth 4 (n* 32): solved up to that length" in fit["note"]
  assert "longer length" in fit["note"]
  # Grown to length 64 (train.length_max): n* 32 is measured there, so the fit takes it.
  grown = fits.depth_vs_log_nstar([dict(r, measured_length=64) for r in rows], "best")
  assert "censored" not in grown and grown["n"] == 4
  assert fits.is_censored(dict(length=32, measured_length=64), 64)
  assert not fits.is_censored(dict(length=32, measured_length=64), 32)
  median = fits.depth_vs_log_nstar(rows, "median")  # 26 < 32 at depth 4: not censored
  assert "censored" not in median and [p["depth"] for p in median["points"]] == [1, 2, 3, 4]
  # Only one depth left uncensored: no fit, and the error says to train longer sequences.
  capped = [dict(_row(d, 64, 0, n), length=8) for d, n in [(1, 4), (2, 8), (3, 8)]]
  err = fits.depth_vs_log_nstar(capped)["error"]
  assert err.startswith("1 depth(s) below the full length") and "longer length" in err
  # Two depths left, but with the same n*: the error says log2 n* does not vary.
  flat = [dict(_row(d, 64, 0, n), length=32) for d, n in [(1, 8), (2, 8), (3, 32)]]
  assert "8 at every uncensored depth" in fits.depth_vs_log_nstar(flat)["error"]
  # Median bootstrap: a resampled median that reaches the length is not counted.
  mixed = [dict(_row(d, 64, s, n), length=32) for d, ns in [(1, [4, 4, 4]), (2, [8, 8, 32]),
                                                            (3, [16, 32, 32])]
           for s, n in enumerate(ns)]
  med = fits.depth_vs_log_nstar(mixed, "median")  # depth 3 (median 32) is censored
  assert [p["depth"] for p in med["points"] if not p.get("censored")] == [1, 2]
  assert med["ci95"]["slope"] == pytest.approx([1, 1])  # only draws with depth 2 at 4 or 8
  note = fits.all_fits(rows)["depth_vs_log2_nstar"]["best"]["note"]
  assert "lower bound" in note
