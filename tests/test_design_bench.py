"""`depthscale bench --preset design`: the replay's arithmetic against an independent
reference (numpy's polyfit over the grid's models), on a pool written to a temporary data
directory; and the recorded pool's replay against the issue's acceptance (no JAX)."""
import csv
import dataclasses
import json
import math

import numpy as np
import pytest

from depthscale.bench import design as bench
from depthscale.bench import design_replay as replay
from depthscale.report import design

DEPTHS = [1, 2, 3, 4, 5]


def write_pool(tmp_path, seed=0):
  rng = np.random.default_rng(seed)
  rows = []
  for d in DEPTHS:
    for s in range(10):
      n = int(round(2 ** (0.6 * d + 1.5 + 0.25 * rng.standard_normal())))
      rows.append(dict(depth=d, width=32, lr=0.003, length=24, seed=s, n_star=n,
                       measured_length=96, k_star=min(d - 1, 4), repeats=1))
  with open(tmp_path / "syn.csv", "w", newline="") as f:
    w = csv.DictWriter(f, list(rows[0]))
    w.writeheader()
    w.writerows(rows)
  (tmp_path / "syn.json").write_text(json.dumps(dict(
      config="experiments/khop_depth.py:cpu", overrides=["grid.depth=[1,2,3,4,5]"])))
  return rows


def test_replay_matches_polyfit_on_the_grids_models(tmp_path, monkeypatch):
  rows = write_pool(tmp_path)
  monkeypatch.setattr(bench, "DATA", str(tmp_path))
  got = bench.run_design(replays=12, log=lambda _: None, pool_name="syn")
  truth = 1 / np.polyfit([r["depth"] for r in rows],
                         [math.log2(r["n_star"]) for r in rows], 1)[0]
  assert got["truth"]["slope"] == pytest.approx(truth, rel=1e-9)
  errs = []
  for i in range(12):  # the grid's 4 seeds per depth, drawn as the bench draws them
    rng = np.random.default_rng(i)
    order = [list(rng.permutation(10)) for _ in DEPTHS]
    pts = [(d, math.log2(rows[c * 10 + m]["n_star"])) for c, d in enumerate(DEPTHS)
           for m in order[c][:4]]
    errs.append(1 / np.polyfit(*zip(*pts), 1)[0] - truth)
  want = float(np.sqrt(np.mean(np.square(errs))))
  assert got["rules"]["grid_order"]["rmse_by_share"]["1.0"] == pytest.approx(want, rel=1e-9)
  for name in replay.RULES:
    r = got["rules"][name]
    assert set(r["rmse_by_share"]) == {"0.25", "0.5", "0.75", "1.0"}
    assert 0 < r["share_to_grid"] <= 1.0 and 0 <= r["verdicts_match"] <= 1


@pytest.mark.skipif(not bench.replay_share(), reason="no recorded replay")
def test_the_recorded_replay_keeps_what_it_met():
  """The recorded replay (bench/data/khop_pool_replay.json) against the parts of issue
  58's acceptance it met: the pool (n* rising across depths, at most a quarter censored),
  the adaptive rule below the grid's order and random picks at every share, the full
  grid's error at 0.6 of its compute at most, coverage of at least 0.9 at every share
  (at 25% with the one-sided bound where depth 5's models all reached their length),
  within 10% of `ends` at 50 and 75%. What it did not meet (against `ends` at 100%,
  verdicts) is recorded in BUILD_NOTES.md, Adaptive design."""
  with open(f"{bench.DATA}/{bench.POOL}_replay.json") as f:
    got = json.load(f)
  pool, _, _ = bench.load_pool()
  means = [np.mean(y) for y in pool.y]
  assert all(b > a for a, b in zip(means, means[1:]))  # n* rises with depth
  assert got["pool"]["censored"] <= got["pool"]["models"] / 4 and got["pool"]["models"] >= 50
  ad, rules = got["rules"]["adaptive"], got["rules"]
  for k, v in ad["rmse_by_share"].items():
    assert v < rules["grid_order"]["rmse_by_share"][k] and v < rules["random"]["rmse_by_share"][k]
  assert ad["share_to_grid"] < rules["grid_order"]["share_to_grid"]
  assert ad["share_to_grid"] <= 0.6
  assert min(ad["coverage_by_share"].values()) >= 0.9
  for k in ("0.5", "0.75"):  # within 10% of `ends` from half the grid's compute on (but 1.0)
    assert ad["rmse_by_share"][k] <= 1.1 * rules["ends"]["rmse_by_share"][k], k
  own = ad["at_budget"]  # the study `run` makes at the default budget, its reserve kept
  assert own["decided"] == 1.0 and own["coverage"] >= 0.9 and own["spent"] <= own["budget"]
  assert ad["at_budgets"][str(own["budget"])] == own
  grid = rules["grid_order"]["rmse_by_share"]["1.0"]
  below = [b for b, o in ad["at_budgets"].items() if o["rmse"] <= grid]
  assert ad["budget_to_grid"] == min(map(float, below))  # the first budget at the grid's
  for o in ad["at_budgets"].values():  # every budget decides the claims (the reserve)
    assert o["decided"] == 1.0 and o["spent"] <= o["budget"] + 1e-9
  assert got["settings"] == json.loads(json.dumps(dataclasses.asdict(design.Settings())))


def test_a_grids_identity_ignores_the_adaptive_rules_fields():
  """A grid trains the same models whatever design.explore or round_size say, so a
  finished grid reruns under a changed rule; an adaptive study's rule is its identity."""
  from depthscale import config
  from depthscale.sweep import study as study_lib
  spec = "experiments/khop_depth.py:cpu,grow,adaptive"
  ident = lambda *o: study_lib.identity(config.load(spec, list(o)))
  grid = ident("design.kind='grid'")
  assert grid == ident("design.kind='grid'", "design.explore=0.5", "design.round_size=3")
  assert ident("design.explore=0.5") != ident()  # adaptive: the rule decides the models
  assert ident("design.kind='grid'", "grid.seed=[0, 1, 2]") != grid


@pytest.mark.skipif(not bench.replay_share(), reason="no recorded replay")
def test_plans_line_quotes_the_recorded_study_of_its_budget_and_reserve():
  """`plan` quotes the replay's study at the default budget (its reserve kept) only for a
  study of that budget and reserve."""
  with open(f"{bench.DATA}/{bench.POOL}_replay.json") as f:
    ad = json.load(f)["rules"]["adaptive"]
  own, enough = ad["at_budget"], ad["budget_to_grid"]
  quoted = f"error {own['rmse']:.3f} against the grid's"
  assert quoted in bench.plan_line(3600.0, own["budget"], True)
  assert quoted not in bench.plan_line(3600.0, own["budget"], False)
  assert quoted not in bench.plan_line(3600.0, 0.3, True)
  hint = f"--config.design.budget={enough:g}"
  assert hint in bench.plan_line(3600.0, enough - 0.05, True)
  assert hint not in bench.plan_line(3600.0, enough, True)
  assert hint not in bench.plan_line(3600.0, enough - 0.05, False)  # another reserve


def test_a_study_at_its_budget_is_judged_beside_the_grid_drawn_with_it(tmp_path, monkeypatch):
  """`as_grid`: the study's verdicts equal those of the grid of the same replay (the first
  4 seeds of each depth's order), against a claim that holds where seed 3 is at depth 4
  (as the recorded pool's khop_bound rests on one depth-4 seed)."""
  write_pool(tmp_path)
  monkeypatch.setattr(bench, "DATA", str(tmp_path))
  pool, _, _ = bench.load_pool("syn")
  has_3 = lambda rows: (any(r["depth"] == 4 and r["seed"] == 3 for r in rows),)
  grid_cost = 4 * float(np.sum(pool.cost))
  seen = set()
  for i in range(12):
    rng = np.random.default_rng(i)
    order = [list(rng.permutation(10)) for _ in DEPTHS]
    s = design.Settings(budget=0.6)
    grid_v = has_3([pool.rows[c][m] for c, m in replay.grid_models(order, 4)])
    got = replay.at_budget(pool, order, 4, s, 1.0, has_3, (True,), grid_v)
    taken = replay._seq_adaptive(pool, order, grid_cost, s, full=False)
    n4 = sum(c == 3 for c, _ in taken)
    want = (3 in order[3][:4]) == (3 in order[3][:n4])
    assert got["as_grid"] == want, i
    seen.add(want)
  assert seen == {True, False}  # both cases met in these replays
