"""Each study's own measures and claims: the checks on made-up rows against numbers worked
out here, then the `:cpu,smoke` variants end to end, every report measure recomputed
independently from results.csv, the curves and the held-out accuracies."""
import csv
import json
import os

import numpy as np
import pytest

from depthscale import cli
from depthscale.report import claims, fits

SHORT = ["--no-progress", "--config.train.steps=60"]  # smoke, shorter (one checkpoint: the end)


def _row(**kw):
  return dict(dict(task="t", depth=1, width=32, heads=4, lr=1e-3, length=8, repeats=1,
                   seed=0, n_star=0, eval_loss=1.0, seq_acc=0.5), **kw)


def _check(claim, rows, groups=(), fit=None, companions=None, threshold=0.95):
  return claims.check([dict(claim="c", paper="p", **claim)], rows, list(groups), fit or {},
                      companions or {}, threshold)[0]


def test_size_star_is_the_last_size_of_an_unbroken_run():
  assert fits.size_star([4, 8, 16], [0.99, 0.96, 0.5], 0.95) == 8
  assert fits.size_star([16, 4, 8], [0.99, 0.99, 0.2], 0.95) == 4  # order of the sizes
  assert fits.size_star([4, 8, 16], [0.9, 0.99, 0.99], 0.95) == 0
  rows = [_row(depth=d, seed=s, length=n, seq_acc=acc) for d, s, n, acc in
          [(1, 0, 4, 0.99), (1, 0, 8, 0.6), (1, 1, 4, 0.97), (1, 1, 8, 0.96),
           (2, 0, 4, 1.0), (2, 0, 8, 1.0)]]
  got = {(r["depth"], r["seed"]): r["n_star"] for r in fits.size_rows(rows, 0.95)}
  assert got == {(1, 0): 4, (1, 1): 8, (2, 0): 8}


def test_an_adaptive_study_missing_a_depth_leaves_its_claims_undecided():
  """A claim judged on fewer depths than its grid's would hold where the grid's fails
  (khop_bound at depth 4 below, as live on seeds 10-13): undecided, said in the report."""
  from depthscale.report import sections
  rows = [_row(depth=d, seed=0, n_star=n, k_star=k) for d, n, k in
          [(1, 4, 0), (2, 6, 1), (3, 9, 2), (4, 10, 2), (5, 14, 4)]]
  claim = [dict(claim="c", paper="p", kind="khop_bound", k_max=4)]
  config = {"design": {"kind": "adaptive"}, "grid": {"depth": [1, 2, 3, 4, 5]}}
  assert claims.check(claim, rows, [], {}, {}, 0.95)[0]["holds"] is False  # depth 4: k* 2
  without = [r for r in rows if r["depth"] != 4]
  assert claims.check(claim, without, [], {}, {}, 0.95)[0]["holds"] is True  # judged on 1-3, 5
  assert claims.unmeasured_depths(config, without) == [4]
  assert claims.unmeasured_depths(dict(config, design={"kind": "grid"}), without) == []
  got = claims.check(claim, without, [], {}, {}, 0.95, claims.unmeasured_depths(config, without))
  assert got[0]["holds"] is None and "undecided: depth 4 not trained" in got[0]["measured"]
  md = "\n".join(sections.claims(got))
  assert "0 of 1 hold, 1 undecided" in md and "| undecided |" in md


def test_claim_kinds_on_made_up_rows():
  rows = [_row(depth=d, seed=s, eval_loss=l, n_star=n, k_star=k) for d, s, l, n, k in
          [(1, 0, 0.9, 2, 0), (1, 1, 0.8, 3, 0), (2, 0, 0.5, 5, 1), (2, 1, 0.05, 4, 1),
           (3, 0, 0.3, 9, 2), (3, 1, 0.6, 8, 3), (4, 0, 0.2, 9, 4), (4, 1, 0.9, 2, 1)]]
  assert not _check(dict(kind="loss_above", value=0.7), rows)["holds"]   # 0.05 < 0.7
  below = _check(dict(kind="loss_below", value=0.1), rows)
  assert below["holds"] and "depth 2: 0.05" in below["measured"]
  assert _check(dict(kind="improves", axis="depth", measure="n_star"), rows)["holds"]
  # best loss by depth 0.8, 0.05, 0.3, 0.2: worse after depth 2 by more than tol
  assert not _check(dict(kind="improves", axis="depth", measure="eval_loss"), rows)["holds"]
  assert _check(dict(kind="khop_bound", k_max=4), rows)["holds"]  # k* 1, 3, 4 >= 1, 2, 4
  weaker = [dict(r, k_star=min(r["k_star"], 2)) for r in rows]
  assert not _check(dict(kind="khop_bound", k_max=4), weaker)["holds"]  # depth 4 needs 4
  control = [_row(depth=d, n_star=9) for d in (1, 2, 3, 4)]
  more = dict(kind="more_than_companion", companion="control")
  assert _check(more, rows, companions={"control": control})["holds"]  # gain 6 vs 0
  assert not _check(more, control, companions={"control": rows})["holds"]
  assert "not found" in _check(more, rows)["measured"]
  both = dict(kind="both_improve", companion="solvable")
  assert _check(both, rows, companions={"solvable": rows})["holds"]  # gains 6 and 6
  assert not _check(both, rows, companions={"solvable": control})["holds"]  # 6 and 0
  assert not _check(both, control, companions={"solvable": rows})["holds"]  # 0 and 6
  assert "gain 6" in _check(both, rows, companions={"solvable": rows})["measured"]
  # medians by depth: rows 2.5, 4.5, 8.5, 5.5; the control 9 at every depth
  least = dict(kind="at_least_companion", companion="control")
  got = _check(least, rows, companions={"control": control})
  assert got["holds"] and "depth 1: 2.5, depth 2: 4.5" in got["measured"]
  assert not _check(least, control, companions={"control": rows})["holds"]  # 2.5 < 9
  one_off = [dict(r, n_star=8) if r["depth"] == 3 else r for r in control]  # 8 < 8.5
  assert not _check(least, rows, companions={"control": one_off})["holds"]
  assert not _check(least, rows, companions={"control": control[:2]})["holds"]  # no depth 3
  beats = dict(kind="beats_companion", companion="c", companion_where={"depth": 1})
  assert _check(beats, rows, companions={"c": [_row(depth=1, n_star=8)]})["holds"]  # 9 > 8
  assert not _check(beats, rows, companions={"c": [_row(depth=1, n_star=9)]})["holds"]


def test_partial_losses_in_chain_order():
  assert claims.crossings([10, 20, 30], [[0.9, 0.4, 0.1], [0.9, 0.8, 0.3]], 0.5) == [20, 30]
  assert claims.in_chain_order([20, 30, None]) and not claims.in_chain_order([30, 20])
  assert not claims.in_chain_order([None, 20])  # x_2 without x_1
  group = {"rows": [_row(), _row(seed=1)],
           "curves": {"step": [10, 20, 30],
                      "partial_loss_1": [[0.9, 0.4, 0.1], [0.9, 0.9, 0.2]],
                      "partial_loss_2": [[0.9, 0.8, 0.3], [0.9, 0.3, 0.2]]}}
  got = _check(dict(kind="partials_in_order"), [], [group])
  assert not got["holds"] and got["measured"].startswith("1 of 2 models")
  assert claims.positions_solved({"eval_partial_loss_1": 0.2, "eval_partial_loss_2": 0.7,
                                  "eval_partial_loss_3": 0.1}) == 1


def _run(config, workdir, *extra):
  assert cli.main(["run", "--config", config, "--workdir", str(workdir), *SHORT, *extra]) == 0
  with open(workdir / "results.csv") as f:
    rows = list(csv.DictReader(f))
  groups = [json.loads(p.read_text()) for p in sorted((workdir / "groups").glob("*.json"))]
  return rows, groups, json.loads((workdir / "claims.json").read_text())


def _report_table(workdir, title):
  """The body rows of the markdown table under `## title` in report.md, as cell lists."""
  lines = (workdir / "report.md").read_text().splitlines()
  after = lines[lines.index(f"## {title}"):]
  start = next(i for i, l in enumerate(after) if l.startswith("|"))
  end = next((i for i, l in enumerate(after[start:]) if not l.startswith("|")), None)
  table = after[start:None if end is None else start + end]
  return [[c.strip() for c in l.strip("|").split("|")] for l in table[2:]]


@pytest.mark.slow
def test_retrieval_partial_losses_and_claims(tmp_path):
  rows, groups, checked = _run("experiments/retrieval_layers.py:ic,cpu,smoke", tmp_path / "w")
  assert [c["claim"][:20] for c in checked] and all(
      set(c) == {"claim", "paper", "measured", "holds"} for c in checked)
  curves = groups[0]["curves"]
  d = int(rows[0]["length"])  # chain length D: one partial loss per position
  assert sorted(k for k in curves if k.startswith("partial_loss_")) == [
      f"partial_loss_{i}" for i in range(1, d + 1)]
  partial = np.stack([np.asarray(curves[f"partial_loss_{i}"], float) for i in range(1, d + 1)])
  # the chain positions' losses average to the training loss (same examples, D equal parts)
  np.testing.assert_allclose(partial.mean(0), np.asarray(curves["loss"], float), rtol=1e-5)
  for r in groups[0]["rows"]:
    mean = np.mean([r[f"eval_partial_loss_{i}"] for i in range(1, d + 1)])
    np.testing.assert_allclose(mean, r["eval_loss"], rtol=1e-5)
  # the report's steps below 0.5, recomputed from the curves
  table = _report_table(tmp_path / "w", "Partial losses (per chain position) over training")
  by_model = {(int(t[0]), int(t[1])): t[2:2 + d] for t in table}
  for i, r in enumerate(groups[0]["rows"]):
    want = []
    for p in partial[:, i]:
      hit = np.nonzero(p < 0.5)[0]
      want.append(str(curves["step"][hit[0]]) if hit.size else "–")
    assert by_model[(r["depth"], r["seed"])] == want
  # the held-out loss claim lists min eval_loss per depth from results.csv
  best = {}
  for r in rows:
    best[int(r["depth"])] = min(best.get(int(r["depth"]), 9.0), float(r["eval_loss"]))
  loss_claim = checked[0]["measured"]
  for d, v in best.items():
    assert f"depth {d}: {v:.3g}" in loss_claim
  assert checked[0]["holds"] == any(v < 0.1 for v in best.values())


@pytest.mark.slow
def test_reachability_accuracy_per_size(tmp_path):
  rows, groups, checked = _run("experiments/reachability_depth.py:cycles,cpu,smoke",
                               tmp_path / "w")
  for g in groups:  # one counted position: the decision's accuracy is the sequence's
    for r, acc in zip(g["rows"], g["per_position_acc"]):
      assert len(acc) == 1 and acc[0] == pytest.approx(r["seq_acc"], abs=1e-6)
  best = {}
  for r in rows:
    key = (int(r["depth"]), int(r["length"]))
    best[key] = max(best.get(key, 0.0), float(r["seq_acc"]))
  sizes = sorted({n for _, n in best})
  table = _report_table(tmp_path / "w", "Accuracy per size")
  for t in table:
    d = int(t[0])
    accs = [best[(d, n)] for n in sizes]
    assert [float(x) for x in t[3:3 + len(sizes)]] == pytest.approx(accs, abs=5e-4)
    solved = 0
    for n, a in zip(sizes, accs):
      if a < 0.95:
        break
      solved = n
    assert int(t[-1]) == solved
  # the claim: per seed, the largest size solved; then the best seed per depth
  per_seed = {}
  for r in rows:
    per_seed.setdefault((int(r["depth"]), r["seed"]), []).append(
        (int(r["length"]), float(r["seq_acc"])))
  star = {}
  for (d, _), cells in per_seed.items():
    solved = 0
    for n, a in sorted(cells):
      if a < 0.95:
        break
      solved = n
    star[d] = max(star.get(d, 0), solved)
  assert checked[0]["measured"] == "best size_star by depth: " + ", ".join(
      f"depth {d}: {v}" for d, v in sorted(star.items()))
  grows = list(star.values())
  assert checked[0]["holds"] == (grows == sorted(grows) and grows[-1] > grows[0])


@pytest.mark.slow
def test_looped_beside_standard_models(tmp_path):
  work = tmp_path / "w"
  rows, groups, checked = _run("experiments/looped_a5.py:cpu,smoke", work)
  with open(work / "standard" / "results.csv") as f:
    standard = list(csv.DictReader(f))
  for g in groups:  # n* recomputed from the held-out accuracy per position
    for r, acc in zip(g["rows"], g["per_position_acc"]):
      below = np.nonzero(np.asarray(acc) < 0.95)[0]
      assert r["n_star"] == (int(below[0]) if below.size else len(acc))
  best = lambda rs, key: {k: max(int(r["n_star"]) for r in rs if key(r) == k)
                          for k in {key(r) for r in rs}}
  looped = best(rows, lambda r: int(r["depth"]) * int(r["repeats"]))
  plain = best(standard, lambda r: int(r["depth"]))
  table = _report_table(work, "Beside the companion run `standard`")
  for t in table:
    d = int(t[0])
    assert t[1] == str(looped.get(d, "–")) and t[2] == str(plain.get(d, "–"))
  fit = json.loads((work / "fits.json").read_text())["fits"]
  assert "repeats_vs_log2_nstar" in fit
  same_params = checked[1]
  assert same_params["holds"] == (max(looped.values()) > plain[1])


@pytest.mark.parametrize("override, words", [
    ("--config.report.claims=[{'kind': 'grow', 'claim': 'x'}]", ["kind 'grow'", "improves"]),
    ("--config.report.claims=[{'kind': 'loss_above', 'claim': 'x'}]", ["give value"]),
    ("--config.report.claims=[{'kind': 'beats_companion', 'claim': 'x', 'companion': 'c'}]",
     ["companion 'c' is not in report.companions"]),
])
def test_bad_claims_are_refused_in_one_line_before_compiling(override, words, capsys):
  assert cli.main(["plan", "--no-probe", "--config", "experiments/quickstart.py:smoke",
                   override]) == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and all(w in err for w in words), err


def test_khop_error_per_k_and_claims(reference_run):
  """The quickstart smoke (k-hop): the per-k error table is 1 - the best seed's held-out
  accuracy at each k (best = largest k*, then lowest held-out loss), and the k* claim
  lists the best k* per depth, both from results.csv."""
  workdir, _ = reference_run
  with open(workdir / "results.csv") as f:
    rows = list(csv.DictReader(f))
  best = {}
  for r in rows:
    key, rank = int(r["depth"]), (int(r["k_star"]), -float(r["eval_loss"]))
    if key not in best or rank > best[key][0]:
      best[key] = (rank, [1 - float(a) for a in r["level_acc"].split()])
  table = _report_table(workdir, "Error per k by depth (best seed) beside the paper")
  assert sorted(int(t[0]) for t in table) == sorted(best)
  for t in table:
    errors = best[int(t[0])][1]
    assert [float(x) for x in t[2:2 + len(errors)]] == pytest.approx(errors, abs=1.5e-3)
  checked = json.loads((workdir / "claims.json").read_text())
  k_claim = next(c for c in checked if c["measured"].startswith("best k_star"))
  for d, ((k, _), _) in best.items():
    assert f"depth {d}: {k}" in k_claim["measured"]


def test_a_rerun_with_edited_claims_updates_config_json(tmp_path):
  from depthscale import config
  from depthscale.sweep import study as study_lib
  c = config.load("experiments/quickstart.py:smoke")
  study_lib.claim_workdir(study_lib.resolve(c), str(tmp_path))
  c.report.claims = c.report.claims[:1]
  study_lib.claim_workdir(study_lib.resolve(c), str(tmp_path))
  saved = json.loads((tmp_path / "config.json").read_text())
  assert len(saved["report"]["claims"]) == 1


def test_claims_mark_n_star_at_the_full_length_as_a_lower_bound():
  rows = [_row(depth=d, seed=0, n_star=n, length=8) for d, n in [(1, 3), (2, 8), (3, 8)]]
  got = _check(dict(kind="improves", axis="depth", measure="n_star"), rows)
  assert got["holds"]
  assert got["measured"].endswith("n* = the full length (a lower bound) at depth 2, 3")
  control = [_row(depth=d, n_star=8, length=8) for d in (1, 2, 3)]
  more = _check(dict(kind="more_than_companion", companion="control"), rows,
                companions={"control": control})
  assert more["holds"]  # gain 5 against 0; the control's 8s are lower bounds, and it says so
  assert "(gain 0; n* = the full length (a lower bound) at depth 1, 2, 3)" in more["measured"]
  assert "lower bound" not in _check(dict(kind="improves", axis="depth"),
                                     [_row(depth=d, n_star=n) for d, n in [(1, 2), (2, 5)]]
                                     )["measured"]


@pytest.mark.slow
def test_a5_over_generators_beside_its_controls(tmp_path):
  """a5_depth.py:cpu,smoke: A5 over generators beside Z60 and A4 x Z5 (companions, same
  seeds); each claim's verdict recomputed from the three results.csv files."""
  work = tmp_path / "w"
  rows, groups, checked = _run("experiments/a5_depth.py:cpu,smoke", work,
                               "--config.grid.seed=[3,4]")
  cfg = json.loads((work / "config.json").read_text())
  assert cfg["task_options"]["inputs"] == "generators"
  others = {}
  for name in ("control", "solvable"):
    with open(work / name / "results.csv") as f:
      others[name] = list(csv.DictReader(f))
    assert {int(r["seed"]) for r in others[name]} == {3, 4}  # the study's seeds
    assert {int(r["steps"]) for r in others[name]} == {60}  # and its steps (SHORT)
  best = lambda rs: {d: max(int(r["n_star"]) for r in rs if int(r["depth"]) == d)
                     for d in sorted({int(r["depth"]) for r in rs})}
  mine = best(rows)
  by_claim = {c["claim"]: c for c in checked}
  improves = by_claim["more depth, longer sequences solved (best seed n*)"]
  vals = list(mine.values())
  assert improves["holds"] == (vals == sorted(vals) and vals[-1] > vals[0])
  gain = lambda t: list(t.values())[-1] - list(t.values())[0]
  theirs = best(others["control"])
  claim = next(c for c in checked if "control Z60 " in c["claim"])
  expect = gain(mine) > gain(theirs) and theirs[1] >= mine[1]
  assert claim["holds"] == expect, (mine, theirs, claim)
  assert f"gain {gain(theirs)}" in claim["measured"]
  median = lambda rs: {d: float(np.median([int(r["n_star"]) for r in rs if int(r["depth"]) == d]))
                       for d in sorted({int(r["depth"]) for r in rs})}
  claim = next(c for c in checked if "Z60 is solved at least as far as A5" in c["claim"])
  a5, z60 = median(rows), median(others["control"])
  assert claim["holds"] == all(z60[d] >= a5[d] for d in a5), (a5, z60, claim)
  assert f"depth 1: {a5[1]:.3g}" in claim["measured"]
  # the solvable control as the literature reports it: it needs depth too (both rise)
  theirs = best(others["solvable"])
  claim = next(c for c in checked if "A4 x Z5 needs depth at this scale too" in c["claim"])
  assert "Merrill, Petty & Sabharwal 2024" in claim["paper"]
  assert claim["holds"] == (gain(mine) > 0 and gain(theirs) > 0), (mine, theirs, claim)
  assert f"gain {gain(mine)}" in claim["measured"] and f"gain {gain(theirs)}" in claim["measured"]


def test_each_claim_kind_holds_and_fails_on_rows_worked_out_here():
  """Every kind in claims.KINDS, on both sides, the expected verdicts worked out by hand
  (a check that always answered False, or always True, fails here)."""
  rows = [_row(depth=d, seed=s, eval_loss=l) for d, s, l in
          [(1, 0, 0.9), (1, 1, 0.8), (2, 0, 0.75), (2, 1, 0.72)]]
  assert _check(dict(kind="loss_above", value=0.7), rows)["holds"]        # lowest 0.72 > 0.7
  assert not _check(dict(kind="loss_above", value=0.73), rows)["holds"]   # 0.72 < 0.73
  assert not _check(dict(kind="loss_below", value=0.7), rows)["holds"]    # none below 0.7
  assert _check(dict(kind="loss_below", value=0.73), rows)["holds"]       # depth 2: 0.72
  # partial losses: x_1 below 0.5 at step 20, x_2 at step 30 (chain order), for both models
  group = {"rows": [_row(), _row(seed=1)],
           "curves": {"step": [10, 20, 30],
                      "partial_loss_1": [[0.9, 0.4, 0.1], [0.9, 0.3, 0.2]],
                      "partial_loss_2": [[0.9, 0.8, 0.3], [0.9, 0.6, 0.4]]}}
  got = _check(dict(kind="partials_in_order"), [], [group])
  assert got["holds"] and got["measured"].startswith("2 of 2 models")
  never = {**group, "curves": {**group["curves"], "partial_loss_2": [[0.9] * 3, [0.9] * 3]}}
  assert not _check(dict(kind="partials_in_order"), [], [never])["holds"]  # none crossed two
  # fit_slope_positive: the lower end of the slope's 95% interval decides
  def fit(lo, hi):
    return {"depth_vs_log2_nstar": {"best": {"slope": (lo + hi) / 2, "r2": 0.9,
                                             "ci95": {"slope": [lo, hi]}}}}
  slope = dict(kind="fit_slope_positive", axis="depth")
  held = _check(slope, rows, fit=fit(0.4, 1.2))
  assert held["holds"] and "slope 0.8, 95% CI [0.4, 1.2]" in held["measured"]
  assert not _check(slope, rows, fit=fit(-0.1, 1.7))["holds"]   # the interval holds 0
  assert not _check(slope, rows, fit=fit(-2.0, -0.5))["holds"]  # a negative slope
  no_fit = _check(slope, rows, fit={"depth_vs_log2_nstar": {"best": {"error": "one depth"}}})
  assert not no_fit["holds"] and "one depth" in no_fit["measured"]
  assert not _check(slope, rows, fit={})["holds"]                # no depth fit at all
  assert set(claims.KINDS) == {"loss_above", "loss_below", "partials_in_order", "improves",
                               "khop_bound", "fit_slope_positive", "more_than_companion",
                               "beats_companion", "both_improve",
                               "at_least_companion"}  # a new kind needs rows here too
