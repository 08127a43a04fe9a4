"""The adaptive design's fit and rule (report/cell_law.py, design_rule.py, design.py) on
synthetic laws with a known slope and noise: no JAX, nothing compiled. References are
independent (scipy's t quantile and a direct maximum of the censored likelihood), and each
test of the rule is one a rule that places models at random fails."""
import math

import numpy as np
import pytest
from scipy import optimize, stats

from depthscale.bench import design_replay as replay
from depthscale.report import cell_law, design, design_rule

XS = [1, 2, 3, 4, 5]


def pool(seed, law=lambda x: 0.6 * x + 1.5, sd=0.3, n=10, cost=None, cap=math.inf):
  """A synthetic pool: n seeds per depth of log2 n* = law(x) + normal noise (sd per
  depth or one), censored at `cap`."""
  rng = np.random.default_rng(seed)
  sds = sd if isinstance(sd, (list, tuple)) else [sd] * len(XS)
  y = [[law(x) + s * rng.standard_normal() for _ in range(n)] for x, s in zip(XS, sds)]
  cens = [[v >= cap for v in ys] for ys in y]
  y = [[min(v, cap) for v in ys] for ys in y]
  return replay.Pool(x=XS, y=y, censored=cens, rows=[[{}] * n for _ in XS],
                     cap=[cap] * len(XS), cost=cost or [float(x) for x in XS])


def rmse_by_rule(law, sd, replays=120, shares=(0.5,), truth=None, cost=None):
  """Per rule: rmse and coverage at `shares` against the population's slope."""
  truth = truth or 1 / (law(2) - law(1))
  out = {}
  for rule in replay.RULES:
    errs, cover = [], []
    for i in range(replays):
      p = pool(1000 + i, law, sd, cost=cost)
      rng = np.random.default_rng(i)
      order = [list(rng.permutation(10)) for _ in XS]
      seq = replay.sequence(rule, p, order, 4, rng, design.Settings())
      ev = replay.evaluate(p, seq, shares, 4 * sum(p.cost), truth, lambda r: (), ())
      errs.append([e["err"] for e in ev])
      cover.append([e["covered"] for e in ev])
    errs = np.array(errs, float)
    out[rule] = (np.sqrt(np.nanmean(errs**2, 0)), np.mean(cover, 0))
  return out


def test_t975_against_scipy():
  for dof in (1, 2, 3, 5, 6, 8, 12, 30, 100):
    assert cell_law.t975(dof) == pytest.approx(stats.t.ppf(0.975, dof), rel=2e-3)
  assert cell_law.t975(0.5) == math.inf


def test_censored_mean_is_the_likelihood_maximum():
  y, cens, sigma = [2.0, 2.4, 3.0, 3.0], [False, False, True, True], 0.5
  def nll(mu):
    ex = [stats.norm.logpdf(v, mu, sigma) for v, c in zip(y, cens) if not c]
    lb = [stats.norm.logsf(v, mu, sigma) for v, c in zip(y, cens) if c]
    return -(sum(ex) + sum(lb))
  ref = optimize.minimize_scalar(nll, bounds=(0, 10), method="bounded",
                                 options={"xatol": 1e-10}).x
  assert cell_law.cell_mean(y, cens, sigma) == pytest.approx(ref, abs=1e-6)
  assert cell_law.cell_mean(y, cens, sigma) > np.mean(y)  # a bound pulls the mean up
  assert math.isnan(cell_law.cell_mean([3.0, 3.0], [True, True], sigma))


def test_censored_info_is_the_observed_information():
  mu, sigma, bound = 2.0, 0.5, 2.3
  h = 1e-4
  ll = lambda m: stats.norm.logsf(bound, m, sigma)
  second = (ll(mu + h) - 2 * ll(mu) + ll(mu - h)) / h**2
  assert cell_law.censored_info(mu, sigma, bound) == pytest.approx(-second * sigma**2,
                                                                    rel=1e-3)
  assert cell_law.expected_info(mu, sigma, math.inf) == 1.0
  assert cell_law.expected_info(mu, sigma, 1.0) < 0.2  # nearly always censored: little


def test_fit_recovers_an_exact_line_and_its_inverse():
  cells = [cell_law.Cell(x, (0.5 * x + 0.999, 0.5 * x + 1.001), (False, False)) for x in XS]
  f = cell_law.fit(cells)
  assert f["b"] == pytest.approx(0.5, abs=1e-9)
  assert f["slope"] == pytest.approx(2.0, abs=1e-8)
  assert f["intercept"] == pytest.approx(-2.0, abs=1e-8)  # depth = 2 log2 n* - 2
  assert f["ci95"][0] < 2.0 < f["ci95"][1]


def test_one_seed_cells_are_shown_not_fitted():
  line = lambda x: 0.5 * x
  one = [cell_law.Cell(x, (line(x),), (False,)) for x in XS[:3]]
  two = [cell_law.Cell(x, (line(x) + 5, line(x) + 5.1), (False, False)) for x in XS[3:]]
  f = cell_law.fit(one + two)
  assert f["fitted"] == [False, False, False, True, True]
  assert f["b"] == pytest.approx(0.5, abs=1e-9)  # the two-seed cells' line alone
  alone = cell_law.fit(one + [cell_law.Cell(x, (line(x),), (False,)) for x in XS[3:4]]
                       + two[1:])
  assert math.isfinite(alone["slope"]) and alone["ci95"] == [-math.inf, math.inf]


def test_interval_holds_the_truth_at_its_level():
  truth, hits = 1 / 0.6, []
  for i in range(400):
    p = pool(i, sd=[0.1, 0.2, 0.3, 0.4, 0.5], n=3)
    f = cell_law.fit(replay.cells_of(p, [(c, m) for c in range(5) for m in range(3)]))
    hits.append(f["ci95"][0] <= truth <= f["ci95"][1])
  # a z interval (no t, no Satterthwaite) falls short; the dof is at most the deep end's
  # own 2 here (cell_law.fit: an adaptive design's picks select cells whose scatter looks
  # small, and Satterthwaite's larger dof then fell to 0.89 on a line), so it errs wide
  assert 0.92 <= np.mean(hits) <= 0.999


def test_normal_quantile_against_scipy():
  for p in (0.001, 0.2, 0.5, 0.842, 0.975):
    assert cell_law.normal_quantile(p) == pytest.approx(stats.norm.ppf(p), abs=1e-9)


@pytest.mark.parametrize("sd", [0.3, [0.1, 0.2, 0.3, 0.4, 0.5], [0.3, 0.3, 0.3, 0.3, 1.0]])
def test_a_deep_end_censored_throughout_bounds_the_slope_at_its_level(sd):
  """Depth 1 measured with 4 seeds, depth 5's 2 seeds both censored (no mean, no slope):
  the one-sided bound holds the truth at 95% or more, whether depth 5 is as noisy as depth
  1, noisier along the line or far noisier alone (its sigma is borrowed), and says
  something (median under 2x the truth). Measured 2026-11-28: 1.0 on each (the bound is
  conservative); without both the deep cell's sigma term and depth 1's t bound, 0.90 and
  0.91 where depth 5 is as noisy as depth 1 or far noisier (either term alone: 0.99-1.0)."""
  truth, hits, bounds = 1 / 0.6, [], []
  for i in range(400):
    p = pool(i, sd=sd, n=4, cap=4.3)  # the law at depth 5: 4.5, above the cap
    f = cell_law.fit(replay.cells_of(p, [(0, m) for m in range(4)] + [(4, 0), (4, 1)]))
    if "error" in f and f.get("slope_max") is not None:
      hits.append(truth <= f["slope_max"])
      bounds.append(f["slope_max"])
  assert len(hits) >= 100 and np.mean(hits) >= 0.95 and np.median(bounds) < 2 * truth


def test_rule_moves_seeds_to_the_ends_of_a_straight_line():
  p = pool(7)
  taken = [(c, m) for c in (0, 2, 4) for m in range(2)]
  d = design.decide(replay.cells_of(p, taken), [1.0] * 5, 20.0, 6.0,
                    design.Settings(round_size=8, explore=0.0, budget=1.0))
  cells = [x["cell"] for x in d["picks"]]
  assert set(cells) <= {0, 4} and len(cells) == 8  # a random rule puts most elsewhere


def test_rule_pays_for_compute_and_skips_censored_cells():
  p = pool(7)
  taken = [(c, m) for c in (0, 4) for m in range(3)]
  cells = replay.cells_of(p, taken)
  deep = {}
  for name, cost in (("equal", [1] * 5), ("9x", [1, 1, 1, 1, 9])):
    got = design_rule.pick(cell_law.fit(cells), [math.inf] * 5, cost, [3, 0, 0, 0, 3],
                           size=8, max_seeds=10, explore=0.0)
    deep[name] = [x["cell"] for x in got].count(4)
  # each end's noise is its own 3 seeds' scatter: the deep end costing 9x loses picks to
  # the shallow one (a rule blind to compute, or random, does not move them)
  assert deep["9x"] <= deep["equal"] - 2, deep
  capped = [math.inf] * 4 + [cells[4].y[0] - 1.0]  # depth 5 now reaches its length
  censored = design_rule.pick(cell_law.fit(cells), capped, [1.0] * 5, [3, 0, 0, 0, 3],
                              size=4, max_seeds=10, explore=0.0)
  assert 4 not in [x["cell"] for x in censored]


def test_chi2_quantile_against_scipy():
  for k in (1, 2, 5, 20):
    assert design_rule.chi2_quantile(design_rule.NOISE_Q, k) == pytest.approx(
        stats.chi2.ppf(design_rule.NOISE_Q, k), rel=0.05)


def test_two_seeds_that_agree_by_chance_do_not_make_a_quiet_cell(monkeypatch):
  """Depth 1 with six seeds (sd 0.1), depth 5 (5x the compute) with two that agree to 0.05:
  scored at the upper bound of its noise, depth 5 still gets one of the next four seeds;
  scored at the estimate itself (two seeds' scatter taken at its word), none."""
  y1 = (2.0, 2.2, 1.9, 2.1, 2.05, 1.95)
  cells = [cell_law.Cell(1, y1, (False,) * 6), cell_law.Cell(2), cell_law.Cell(3),
           cell_law.Cell(4), cell_law.Cell(5, (5.0, 5.05), (False, False))]

  def deep_picks():
    got = design_rule.pick(cell_law.fit(cells), [math.inf] * 5, [1, 2, 3, 4, 5],
                           [6, 0, 0, 0, 2], size=4, max_seeds=10, explore=0.0)
    return [x["cell"] for x in got].count(4)
  assert deep_picks() >= 1
  monkeypatch.setattr(design_rule, "scored_noise", lambda fit: fit)
  assert deep_picks() == 0


def test_exploration_reaches_every_depth():
  p = pool(3)
  taken = [(c, m) for c in (0, 2, 4) for m in range(2)]
  d = design.decide(replay.cells_of(p, taken), [1.0] * 5, 20.0, 6.0,
                    design.Settings(round_size=4, explore=0.5, budget=1.0))
  assert {1, 3} <= {x["cell"] for x in d["picks"]}
  none = design.decide(replay.cells_of(p, taken), [1.0] * 5, 20.0, 6.0,
                       design.Settings(round_size=4, explore=0.0, budget=1.0))
  assert not {1, 3} & {x["cell"] for x in none["picks"]}


def test_budget_and_interval_stop_the_design():
  p = pool(3)
  taken = [(c, m) for c in range(5) for m in range(4)]
  cells = replay.cells_of(p, taken)
  assert design.decide(cells, [1.0] * 5, 20.0, 20.0, design.Settings(budget=1.0))["stop"] == \
      "budget"
  assert design.decide(cells, [1.0] * 5, 20.0, 10.0,
                       design.Settings(budget=1.0, stop_ci=10.0))["stop"] == "interval"


def test_adaptive_beats_random_and_the_grid_on_a_straight_line():
  got = rmse_by_rule(lambda x: 0.6 * x + 1.5, 0.3)
  (ad, cov), = [got["adaptive"]]
  assert ad[0] < got["random"][0][0] and ad[0] < got["grid_order"][0][0]
  assert ad[0] < 1.15 * got["ends"][0][0]  # near the best fixed design for a line
  assert cov[0] >= 0.9


def test_a_bending_law_is_estimated_as_the_grid_would():
  law = lambda x: 1.5 + 0.3 * x + 0.2 * max(x - 4, 0) * 4  # straight, then steeper at 5
  grid_line = np.polyfit(XS, [law(x) for x in XS], 1)[0]
  got = rmse_by_rule(law, 0.2, shares=(1.0,), truth=1 / grid_line)
  assert got["adaptive"][0][0] < got["ends"][0][0]  # ends fits the chord, not the line


def paid_in_order(picks, cost, left):
  """The cells of `picks` a budget without a reserve pays for: in order, while each fits."""
  paid = []
  for q in picks:
    if cost[q["cell"]] <= left:
      paid.append(q["cell"])
      left -= cost[q["cell"]]
  return paid


def test_the_budget_keeps_one_model_for_every_unmeasured_depth():
  """A study ends with a model at each depth of its grid (its claims are undecided while
  one has none): where the budget left pays for little more than the unmeasured depths,
  the variance picks leave their share, and the rounds measure every depth."""
  p = pool(5)
  taken = [(c, m) for c in (0, 4) for m in range(3)]  # the ends, 3 seeds each
  cost = [float(x) for x in XS]
  spent = 3 * (cost[0] + cost[4])
  grid_cost = 4 * sum(cost)
  s = design.Settings(budget=(spent + 2 + 3 + 4 + 1) / grid_cost)  # the middle + 1 left
  fit = cell_law.fit(replay.cells_of(p, taken))
  picks = design_rule.pick(fit, [math.inf] * 5, cost, [3, 0, 0, 0, 3], size=s.round_size,
                           max_seeds=s.max_seeds, explore=s.explore)
  unpaid = paid_in_order(picks, cost, 2 + 3 + 4 + 1)  # the budget without a reserve
  assert not {1, 2, 3} <= set(unpaid), unpaid  # the variance picks come first
  rounds = []
  while True:
    d = design.decide(replay.cells_of(p, taken), cost, grid_cost, spent, s)
    if d["stop"]:
      break
    rounds.append([q["cell"] for q in d["picks"]])
    for c in rounds[-1]:
      taken.append((c, sum(1 for cc, _ in taken if cc == c)))
      spent += cost[c]
  assert {c for r in rounds for c in r} >= {1, 2, 3}, rounds
  assert spent <= s.budget * grid_cost + 1e-9


def test_without_the_reserve_the_budget_goes_where_the_variance_shrinks():
  """design.reserve=false: the picks in order while they fit, as before the reserve."""
  p = pool(5)
  taken = [(c, m) for c in (0, 4) for m in range(3)]
  cost = [float(x) for x in XS]
  spent = 3 * (cost[0] + cost[4])
  grid_cost = 4 * sum(cost)
  left = 2 + 3 + 4 + 1
  s = design.Settings(budget=(spent + left) / grid_cost, reserve=False)
  d = design.decide(replay.cells_of(p, taken), cost, grid_cost, spent, s)
  want = paid_in_order(design_rule.pick(d["fit"], [math.inf] * 5, cost, [3, 0, 0, 0, 3],
                                        size=s.round_size, max_seeds=s.max_seeds,
                                        explore=s.explore), cost, left)
  assert [q["cell"] for q in d["picks"]] == want and not {1, 2, 3} <= set(want)


def test_a_budget_below_the_reserve_still_measures_what_it_can():
  """Where what is left cannot pay for a model at every unmeasured depth, the picks there
  are still taken while they fit, never past the budget."""
  p = pool(5)
  taken = [(c, m) for c in (0, 4) for m in range(2)]
  cost = [float(x) for x in XS]
  spent = 2 * (cost[0] + cost[4])
  grid_cost = 4 * sum(cost)
  s = design.Settings(budget=(spent + 3.5) / grid_cost)  # the reserve would be 2 + 3 + 4
  d = design.decide(replay.cells_of(p, taken), cost, grid_cost, spent, s)
  got = [q["cell"] for q in d["picks"]]
  assert got and set(got) <= {1, 2, 3} and sum(cost[c] for c in got) <= 3.5, d["picks"]
