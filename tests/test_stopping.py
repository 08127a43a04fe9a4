"""Stopping rules (train.stop, core/stopping.py): a model stopped by each rule is the same
model trained alone for its trained steps (curves and held-out results, float64, padded
and compacted groups); the rule's decisions by hand; a stopped group resumes from its
checkpoint to the same results; a study's rows carry trained_steps and the reason."""
import numpy as np
import jax
import pytest

from depthscale import tasks
from depthscale.core import stopping, train
from depthscale.core.ensemble import ModelSpec
from depthscale.io.checkpoint import GroupCheckpoints
from depthscale.sweep import train_group

import lone

# one worker runs this module (make test: --dist loadgroup), so its fixtures are made once
pytestmark = pytest.mark.xdist_group("stopping")

TASK = dict(name="khop", k=0)  # copy the letter: solved within tens of steps
LENGTH, STEPS, K, EVAL = 8, 60, 5, 64
# measured: lr 1e-2 solves by step 5, 5e-4 by step 20; 1e-5 never moves (a plateau);
# 1e30 turns non-finite at once (stops as "frozen")
SPECS = [ModelSpec(1, 16, 2, seed=0, lr=1e-2), ModelSpec(2, 16, 2, seed=1, lr=5e-4),
         ModelSpec(2, 16, 2, seed=2, lr=1e-5), ModelSpec(1, 16, 2, seed=3, lr=1e30)]


def _tcfg(layout):
  return train.TrainConfig(batch_size=16, length=LENGTH, total_steps=STEPS, clip_norm=0.0,
                           layout=layout)


def _group(rule, layout, **kw):
  return train_group.train_group(tasks.make(**TASK), SPECS, _tcfg(layout), steps_per_call=K,
                                 eval_size=EVAL, progress=False,
                                 model_options=dict(dtype="float64"), stop=rule, **kw)


def _alone(spec, steps):
  """One model trained alone (tests/lone.py: a padded group of one, computed once per
  process and model), `steps` steps: its curves and held-out row."""
  r = lone.run(tasks.make(**TASK), spec, _tcfg("pad"), steps, dict(dtype="float64"), K)
  return np.asarray(r.loss[:steps]), r.row(steps, EVAL)


def each_equals_alone(got, specs):
  """Every model of a group result (but those frozen by a non-finite loss) is the model
  trained alone for its trained steps: curves, n* and held-out loss (float64)."""
  with jax.enable_x64(True):
    for i, (spec, row) in enumerate(zip(specs, got.rows)):
      if row["stop"] == "frozen":
        continue
      s = row["trained_steps"]
      loss, alone = _alone(spec, s)
      np.testing.assert_allclose(got.curves["loss"][:s, i], loss, rtol=1e-6, err_msg=str(spec))
      assert np.isnan(got.curves["loss"][s:, i]).all()
      assert row["n_star"] == alone["n_star"]
      np.testing.assert_allclose(row["eval_loss"], alone["eval_loss"], rtol=1e-6)


RULES = {"solved": stopping.Rule("solved", every=K),
         "plateau": stopping.Rule("plateau", every=K, patience=2)}


@pytest.fixture(scope="session")  # outlives the slow-first order (conftest)
def runs():
  with jax.enable_x64(True):
    return {(name, layout): _group(rule, layout) for name, rule in RULES.items()
            for layout in ("pad", "compact")}


@pytest.mark.parametrize("name", sorted(RULES))
@pytest.mark.parametrize("layout", ["pad", "compact"])
def test_a_stopped_model_is_the_model_trained_alone_to_its_stop(runs, name, layout):
  got = runs[(name, layout)]
  reasons = [r["stop"] for r in got.rows]
  assert name in reasons, reasons  # the rule under test stopped someone early
  assert reasons[3] == "frozen" and got.rows[3]["frozen"]
  with jax.enable_x64(True):
    for i, (spec, row) in enumerate(zip(SPECS[:3], got.rows)):
      s = row["trained_steps"]
      assert s % K == 0 and 0 < s <= STEPS and (s < STEPS) == (row["stop"] != "budget")
      loss, alone = _alone(spec, s)
      np.testing.assert_allclose(got.curves["loss"][:s, i], loss, rtol=1e-6, err_msg=str(spec))
      assert np.isnan(got.curves["loss"][s:, i]).all()
      assert row["n_star"] == alone["n_star"] and not row["frozen"]
      np.testing.assert_allclose(row["eval_loss"], alone["eval_loss"], rtol=1e-6)
      if row["stop"] == "solved":
        assert row["n_star"] == LENGTH
      assert row["final_loss"] == got.curves["loss"][s - 1, i]


def test_both_layouts_stop_the_same_models_at_the_same_steps(runs):
  for name in RULES:
    pad, compact = runs[(name, "pad")], runs[(name, "compact")]
    assert ([(r["stop"], r["trained_steps"]) for r in pad.rows]
            == [(r["stop"], r["trained_steps"]) for r in compact.rows])


def test_rule_decisions_by_hand():
  rule = stopping.Rule("plateau", every=10, patience=2, budget=60)
  st = stopping.StopState.fresh(3)
  row = lambda n: dict(n_star=n, seq_acc=0.0, eval_loss=1.0)
  at = lambda step, ns, frozen=(False, False, True): [
      (i, step, row(n), f) for i, (n, f) in enumerate(zip(ns, frozen)) if st.running[i]]
  assert rule.update(st, at(10, [2, 2, 2]), "n_star", 8) == [2]
  assert rule.update(st, at(20, [3, 2]), "n_star", 8) == []
  assert rule.update(st, at(30, [3, 2]), "n_star", 8) == [1]  # 2 evaluations, no gain
  assert rule.update(st, at(40, [3]), "n_star", 8) == [0]
  assert list(st.stopped_at) == [40, 30, 10]
  assert [st.reason_of(i) for i in range(3)] == ["plateau", "plateau", "frozen"]
  solved = stopping.Rule("solved", every=10, budget=60)
  st = stopping.StopState.fresh(3)
  rows = [dict(n_star=8, seq_acc=0.5, eval_loss=1.0), dict(n_star=7, seq_acc=0.99,
                                                           eval_loss=1.0),
          dict(n_star=7, seq_acc=0.94, eval_loss=1.0)]
  assert solved.update(st, [(0, 10, rows[0], False)], "n_star", 8) == [0]
  assert solved.update(st, [(1, 20, rows[1], False)], "size", 8) == [1]  # seq_acc >= 0.95
  assert solved.update(st, [(2, 50, rows[2], False)], "size", 8) == []
  assert solved.update(st, [(2, 60, rows[2], False)], "size", 8) == [2]  # the budget
  assert list(st.stopped_at) == [10, 20, 60] and st.reason_of(2) == "budget"
  assert not stopping.solved("loss", rows[0], 8, 0.95)  # no solved state for a loss task


class _StopAfter(train_group.Hooks):
  """Asks to stop once the group has passed `step` (after some models have stopped)."""

  def __init__(self, step):
    self.step, self.at = step, 0

  def on_progress(self, step, steps_per_s):
    self.at = step

  def should_stop(self):
    return self.at >= self.step


def test_a_stopping_group_resumes_to_the_same_results(tmp_path, runs):
  ref = runs[("plateau", "pad")]
  first = min(r["trained_steps"] for r in ref.rows[:3])
  assert first < STEPS - 20  # a model stopped well before the interruption below
  ckpt = GroupCheckpoints(str(tmp_path / "ckpt"))
  with jax.enable_x64(True):
    with pytest.raises(train_group.Interrupted) as stopped:
      _group(RULES["plateau"], "pad", checkpoints=ckpt, checkpoint_every=20,
             hooks=_StopAfter(first + 5))
    assert first < stopped.value.step < STEPS
    again = _group(RULES["plateau"], "pad", checkpoints=ckpt, checkpoint_every=20)
  np.testing.assert_array_equal(again.curves["loss"], ref.curves["loss"])
  assert [(r["stop"], r["trained_steps"], r["n_star"]) for r in again.rows] == [
      (r["stop"], r["trained_steps"], r["n_star"]) for r in ref.rows]


# A queue: 6 models, 2 slots. Depths alternate so that a compacted program's two slots
# (one of depth 1, one of depth 2) each have a queue of their depth.
QUEUED = [ModelSpec(1 + i % 2, 16, 2, seed=10 + i, lr=lr)
          for i, lr in enumerate([1e-2, 5e-4, 3e-3, 1e-2, 1e-5, 2e-3])]


def _queued(rule, layout, **kw):
  return train_group.train_group(tasks.make(**TASK), QUEUED, _tcfg(layout), steps_per_call=K,
                                 eval_size=EVAL, progress=False, slots=2,
                                 model_options=dict(dtype="float64"), stop=rule, **kw)


@pytest.fixture(scope="session")  # outlives the slow-first order (conftest)
def queued_runs():
  with jax.enable_x64(True):
    return {(name, layout): _queued(RULES.get(name), layout)
            for name, layout in (("solved", "pad"), ("solved", "compact"), ("none", "pad"))}


@pytest.mark.parametrize("name,layout", [("solved", "pad"), ("solved", "compact"),
                                         ("none", "pad")])
def test_a_model_through_a_refilled_slot_is_the_model_trained_alone(queued_runs, name, layout):
  got = queued_runs[(name, layout)]
  started = [r["started_at"] for r in got.rows]
  assert started[:2] == [0, 0] and min(started[2:]) > 0, started  # 4 entered later
  assert got.rows[0]["models_in_program"] == 2
  if name == "none":  # no rule: each model its whole budget, two at a time
    assert [r["trained_steps"] for r in got.rows] == [STEPS] * 6
    assert sorted(started) == [0, 0, STEPS, STEPS, 2 * STEPS, 2 * STEPS]
  each_equals_alone(got, QUEUED)
  if layout == "compact":  # a slot only takes models of its depth
    by_start = sorted(range(6), key=lambda i: started[i])
    assert {QUEUED[i].depth for i in by_start[:2]} == {1, 2}


def test_a_queued_group_resumes_to_the_same_results(tmp_path, queued_runs):
  ref = queued_runs[("solved", "pad")]
  later = sorted(r["started_at"] for r in ref.rows)[3]  # after a refill or two
  ckpt = GroupCheckpoints(str(tmp_path / "ckpt"))
  with jax.enable_x64(True):
    with pytest.raises(train_group.Interrupted) as stopped:
      _queued(RULES["solved"], "pad", checkpoints=ckpt, checkpoint_every=K,
              hooks=_StopAfter(later + 1))
    assert stopped.value.step > later
    again = _queued(RULES["solved"], "pad", checkpoints=ckpt, checkpoint_every=K)
  np.testing.assert_array_equal(again.curves["loss"], ref.curves["loss"])
  assert [(r["stop"], r["trained_steps"], r["started_at"], r["eval_loss"]) for r in again.rows] \
      == [(r["stop"], r["trained_steps"], r["started_at"], r["eval_loss"]) for r in ref.rows]
