"""Successive halving over a setting's learning rates (train.stop=halving, core/halving.py):
the rungs and decisions by hand; in a group, the learning rate kept is the one whose
scout, trained alone, scores best at the rung; every model that trained equals the same
model trained alone (float64, padded and compacted), the halved ones never train, and a
group interrupted after the rung resumes to the same results."""
import math

import jax
import numpy as np
import pytest

from depthscale import tasks
from depthscale.core import halving, stopping
from depthscale.core.ensemble import ModelSpec
from depthscale.io.checkpoint import GroupCheckpoints
from depthscale.sweep import train_group
from test_stopping import EVAL, K, LENGTH, STEPS, TASK, _StopAfter, _alone, _tcfg

# one worker runs this module (make test: --dist loadgroup), so its fixtures are made once
pytestmark = pytest.mark.xdist_group("halving")

LRS = (5e-4, 1e-2, 1e-5)  # the middle one learns the copy fastest (test_stopping)
# two settings (depths 1 and 2) x 3 learning rates x 2 seeds, settings interleaved
SPECS = [ModelSpec(d, 16, 2, seed=s, lr=lr) for s in (0, 1) for lr in LRS for d in (1, 2)]
RUNG = 20  # 60 // 3, a multiple of K


def test_rungs_by_hand():
  assert halving.n_rungs(1, 3) == 0 and halving.n_rungs(3, 3) == 1
  assert halving.n_rungs(4, 3) == 1 and halving.n_rungs(9, 3) == 2 and halving.n_rungs(4, 2) == 2
  assert halving.rung_steps(3, 3, 60, 5) == [20]
  assert halving.rung_steps(9, 3, 60, 5) == [5, 20]   # 60 // 9 = 6, down to a multiple of 5
  assert halving.rung_steps(4, 2, 100, 10) == [20, 50]
  lad = halving.Ladder(SPECS, 3, STEPS, K)
  assert lad.scouts == [0, 1, 2, 3, 4, 5] and lad.rungs == [RUNG]
  assert lad.members[(halving.setting(SPECS[0]), 5e-4)] == [0, 6]
  assert lad.eligible(0, 0) and not lad.eligible(6, RUNG - 1) and lad.eligible(6, RUNG)
  score = {0: 0.5, 2: 0.9, 4: 0.1, 1: 0.7, 3: 0.7}  # scout 5 is missing (frozen): -inf
  assert lad.decide(RUNG - K, score, set()) == []
  d1, d2 = halving.setting(SPECS[0]), halving.setting(SPECS[1])
  assert lad.decide(RUNG, score, set()) == [(d1, 5e-4), (d1, 1e-5), (d2, 1e-2), (d2, 1e-5)]
  # a tie goes to the learning rate listed first; one left in play: nothing to decide
  assert lad.decide(RUNG, {1: 0.7, 3: 0.7}, {(d1, 1e-5), (d1, 5e-4)}) == [
      (d2, 1e-2), (d2, 1e-5)]
  with pytest.raises(ValueError, match="needs steps"):
    halving.Ladder(SPECS, 3, 12, 5)  # 12 // 3 = 4: no rung at a multiple of 5


RULE = stopping.Rule("halving", every=K, eta=3)


def _group(layout, **kw):
  return train_group.train_group(tasks.make(**TASK), SPECS, _tcfg(layout), steps_per_call=K,
                                 eval_size=EVAL, progress=False,
                                 model_options=dict(dtype="float64"), stop=RULE, **kw)


@pytest.fixture(scope="session")  # outlives the slow-first order (conftest)
def runs():
  with jax.enable_x64(True):
    return {layout: _group(layout) for layout in ("pad", "compact")}


@pytest.fixture(scope="session")  # outlives the slow-first order (conftest)
def winners():
  """Per depth, the learning rate whose scout trained alone scores best at the rung."""
  with jax.enable_x64(True):
    out = {}
    for i in range(6):
      row = _alone(SPECS[i], RUNG)[1]
      s = stopping.score("n_star", row, LENGTH)
      d = SPECS[i].depth
      if s > out.get(d, (-math.inf,))[0]:
        out[d] = (s, SPECS[i].lr)
    return {d: lr for d, (_, lr) in out.items()}


@pytest.mark.parametrize("layout", ["pad", "compact"])
def test_halving_keeps_the_best_scout_and_each_model_equals_it_alone(runs, winners, layout):
  got = runs[layout]
  assert got.rows[0]["models_in_program"] == 6  # one slot per scout
  with jax.enable_x64(True):
    for i, (spec, row) in enumerate(zip(SPECS, got.rows)):
      won = spec.lr == winners[spec.depth]
      scout = spec.seed == 0
      want = ("budget", STEPS, 0 if scout else RUNG) if won else (
          ("halved", RUNG, 0) if scout else ("halved", 0, -1))
      assert (row["stop"], row["trained_steps"], row["started_at"]) == want, (spec, row)
      s = row["trained_steps"]
      if s == 0:  # halved before its first step: nothing measured, nothing trained
        assert row["n_star"] is None and row["final_loss"] is None
        assert np.isnan(got.curves["loss"][:, i]).all()
        assert np.isnan(got.per_position_acc[i]).all()
        continue
      loss, alone = _alone(spec, s)
      np.testing.assert_allclose(got.curves["loss"][:s, i], loss, rtol=1e-6, err_msg=str(spec))
      assert np.isnan(got.curves["loss"][s:, i]).all()
      assert row["n_star"] == alone["n_star"]
      np.testing.assert_allclose(row["eval_loss"], alone["eval_loss"], rtol=1e-6)
  trained = sum(r["trained_steps"] for r in got.rows)
  assert trained == 2 * (3 * RUNG + (STEPS - RUNG) + STEPS)  # of 12 * STEPS without halving


def test_a_halving_group_resumes_after_the_rung_to_the_same_results(tmp_path, runs):
  ref = runs["pad"]
  ckpt = GroupCheckpoints(str(tmp_path / "ckpt"))
  with jax.enable_x64(True):
    with pytest.raises(train_group.Interrupted) as stopped:
      _group("pad", checkpoints=ckpt, checkpoint_every=K, hooks=_StopAfter(RUNG + 1))
    assert stopped.value.step > RUNG
    again = _group("pad", checkpoints=ckpt, checkpoint_every=K)
  np.testing.assert_array_equal(again.curves["loss"], ref.curves["loss"])
  key = lambda r: (r["stop"], r["trained_steps"], r["started_at"], r["n_star"])
  assert [key(r) for r in again.rows] == [key(r) for r in ref.rows]
