"""Damaged checkpoints of the current shape (issue 50): a checkpoint whose arrays restore
but cannot be its group's at its step (a slot table, curves, stop state or model state
out of range) is named in one line, the one before it is used, and the group ends with
the results of an uninterrupted run (sweep/saved_check.py). Each case writes its damaged
checkpoints through the normal save, every save from step 20 on (the stop request's save
among them); the one before, step 10, is sound."""
import numpy as np
import pytest

from depthscale import tasks
from depthscale.core import stopping, train
from depthscale.core.ensemble import ModelSpec
from depthscale.io.checkpoint import GroupCheckpoints
from depthscale.sweep import group_run, saved_check, train_group

from test_stopping import _StopAfter

pytestmark = pytest.mark.xdist_group("damaged_state")

SPECS = [ModelSpec(1, 16, 2, seed=0, lr=1e-2), ModelSpec(1, 16, 2, seed=1, lr=3e-3),
         ModelSpec(1, 16, 2, seed=2, lr=1e-4)]  # never solved: the queue trains past 20
TCFG = train.TrainConfig(batch_size=16, length=8, total_steps=40, clip_norm=0.0)
QUEUED = dict(stop=stopping.Rule("solved", every=5), slots=2)  # 3 models in 2 slots


def _run(kind, **kw):
  return train_group.train_group(tasks.make("khop", k=0), SPECS, TCFG, steps_per_call=5,
                                 eval_size=64, progress=False, checkpoint_every=10,
                                 **(QUEUED if kind == "queued" else {}), **kw)


@pytest.fixture(scope="module")
def reference():
  return {kind: _run(kind) for kind in ("static", "queued")}


def _edit_stop(p):
  p["stop"]["stopped_at"][0] = 10**6


def _edit_reason(p):
  p["stop"]["reason"][1] = 9


def _edit_stage_curve(p):
  p["curves"]["stage"][0, 0] = 57


def _edit_curve_future(p):
  p["curves"]["stage"][30, :] = 0


def _edit_model_stage(p):
  p["models"] = p["models"].replace(stage=np.full_like(np.asarray(p["models"].stage), 99))


def _edit_two_slots(p):
  p["table"]["holder"][1] = p["table"]["holder"][0]


def _edit_holder(p):
  p["table"]["holder"][0] = 99


CASES = [("static", _edit_stop, "stop steps"), ("static", _edit_reason, "stop reasons"),
         ("static", _edit_stage_curve, "stage curve values"),
         ("static", _edit_curve_future, "past the checkpoint's step"),
         ("static", _edit_model_stage, "curriculum stages"),
         ("queued", _edit_two_slots, "a model in two slots"),
         ("queued", _edit_holder, "slot holders outside 0..2")]


@pytest.mark.parametrize("kind,edit,words", CASES, ids=[c[1].__name__ for c in CASES])
def test_a_damaged_checkpoint_of_the_current_shape_falls_back_to_the_one_before(
    tmp_path, monkeypatch, capfd, reference, kind, edit, words):
  ckpt = GroupCheckpoints(str(tmp_path / "ckpt"), max_to_keep=5)
  payload = group_run.GroupRun.payload

  def damaged(self):
    out = payload(self)
    if self.at >= 20:
      out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in out.items()}
      for part in ("curves", "stop", "table"):
        if part in out:
          out[part] = {k: np.array(v) for k, v in out[part].items()}
      edit(out)
    return out
  with monkeypatch.context() as m:
    m.setattr(group_run.GroupRun, "payload", damaged)
    with pytest.raises(train_group.Interrupted):
      _run(kind, checkpoints=ckpt, hooks=_StopAfter(20))
  steps = sorted(ckpt.manager.all_steps())
  assert steps[:2] == [10, 20], steps
  capfd.readouterr()
  again = _run(kind, checkpoints=ckpt)
  err = capfd.readouterr().err
  said = [line for line in err.splitlines() if "depthscale: checkpoint step" in line]
  assert len(said) == len(steps) - 1, err  # each damaged one, newest first
  for step, line in zip(reversed(steps[1:]), said):
    assert f"checkpoint step {step} " in line and "inconsistent" in line and words in line
  assert "resumes from its step-10 checkpoint" in err
  ref = reference[kind]
  for a, b in zip(ref.rows, again.rows):
    assert {k: v for k, v in a.items() if not k.endswith("_s")} == \
        {k: v for k, v in b.items() if not k.endswith("_s")}
  for name in ref.curves:
    np.testing.assert_array_equal(ref.curves[name], again.curves[name])


def test_the_checks_pass_the_checkpoints_a_sound_run_writes(tmp_path, reference,
                                                             monkeypatch):
  """The other side: a sound checkpoint is not refused (the latest of each schedule,
  saved on a stop request, restores at once)."""
  seen = []
  check = saved_check.problem

  def recording(tree, step, *a):
    why = check(tree, step, *a)
    seen.append((step, why))
    return why
  monkeypatch.setattr(saved_check, "problem", recording)
  for kind in ("static", "queued"):
    ckpt = GroupCheckpoints(str(tmp_path / kind))
    with pytest.raises(train_group.Interrupted):
      _run(kind, checkpoints=ckpt, hooks=_StopAfter(30))
    _run(kind, checkpoints=ckpt)
  assert [why for _, why in seen] == [None, None] and all(s >= 30 for s, _ in seen), seen
