"""Depth-compacted groups (layout="compact"): each model trains exactly as alone, with
mixed widths and heads, rotary positions, looped models, the fixed curriculum and a model
frozen by NaN; a checkpointed run resumes to the same bits; 4 devices match 1.

In float64, as the padded test in test_core.py: the compaction is exact, but float32
kernels round differently for other batch shapes and training amplifies that.
"""
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from depthscale import tasks
from depthscale.core import train
from depthscale.core.ensemble import ModelSpec
from depthscale.io.checkpoint import GroupCheckpoints
from depthscale.model import compact
from depthscale.sweep import train_group

from conftest import xla_env
import lone

# one worker runs this module (make test: --dist loadgroup), so its fixtures are made once
pytestmark = pytest.mark.xdist_group("compact")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASK = dict(name="word_problem", group="S3")
LENGTH, STEPS, K = 8, 10, 5
# depths 1-3, widths and heads differ; the last one (lr 1e30, no clipping) turns
# non-finite and is frozen; spec order is not depth order
MIXED = [ModelSpec(1, 16, 2, seed=1, lr=3e-3), ModelSpec(3, 24, 2, seed=2, weight_decay=0.1),
         ModelSpec(2, 32, 4, seed=0, warmup=5), ModelSpec(2, 16, 2, seed=3, lr=1e30)]
LOOPED = [ModelSpec(1, 16, 2, seed=0, repeats=3), ModelSpec(2, 24, 4, seed=1, repeats=2)]


class _StopAtOnce(train_group.Hooks):
  def should_stop(self):
    return True


STOP_AT_ONCE = _StopAtOnce()


def _tcfg(layout="compact", curriculum="fixed"):
  return train.TrainConfig(batch_size=4, length=LENGTH, total_steps=STEPS, decay="cosine",
                           clip_norm=0.0, curriculum=curriculum, steps_per_stage=3,
                           layout=layout)


def _group(specs, tcfg, pos, **kw):
  task = tasks.make(**TASK)
  return train_group.train_group(task, specs, tcfg, steps_per_call=K, eval_size=8,
                                 progress=False, model_options=dict(pos=pos, dtype="float64"),
                                 **kw)


def _alone(spec, tcfg, pos):
  """One model as its own group, through the padded (plain vmapped) step (tests/lone.py)."""
  return lone.curves(tasks.make(**TASK), spec, tcfg, STEPS, dict(pos=pos, dtype="float64"), K)


def test_order_profile_and_bands():
  shapes = [(1, 1), (3, 1), (2, 1), (4, 1)] * 2
  order = compact.order(shapes, 2)  # each device: depths 4, 3, 2, 1
  assert [shapes[i][0] for i in order] == [4, 3, 2, 1, 4, 3, 2, 1]
  assert compact.profile(shapes, 2) == ((4, 3, 2, 1),)
  assert compact.profile(shapes, 1) == ((8, 6, 4, 2),)
  assert compact.bands([8, 7, 6, 5, 4, 3, 2, 1]) == [(0, 2), (2, 4), (4, 6), (6, 8)]
  assert compact.bands([4, 4, 2, 1]) == [(0, 2), (2, 3), (3, 4)]
  assert compact.computed_layers(((8, 7, 6, 5, 4, 3, 2, 1),)) == 40  # 36 useful, 64 padded
  looped = [(1, 1), (1, 2), (1, 4), (1, 8), (1, 16)]  # repeats 1..16: 31 of 80 padded
  assert compact.computed_layers(compact.profile(looped, 1)) < 40


@pytest.fixture(scope="session")  # outlives the slow-first order (conftest)
def mixed_run():
  with jax.enable_x64(True):
    return _group(MIXED, _tcfg(), "learned")


# the diverging model's float64 losses pass float32's range: no numpy warning to the user
@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("pos,specs", [("learned", MIXED), ("rotary", LOOPED)])
def test_compact_group_trains_each_model_as_alone(pos, specs, mixed_run):
  with jax.enable_x64(True):
    got = mixed_run if specs is MIXED else _group(specs, _tcfg(curriculum="none"), pos)
    for i, spec in enumerate(specs):
      if spec.lr > 1:  # frozen by NaN (the others, compared with alone, are unaffected)
        assert got.rows[i]["frozen"] and not np.all(np.isfinite(got.curves["loss"][:, i]))
        continue
      loss, stage = _alone(spec, _tcfg(curriculum="none" if specs is LOOPED
                                              else "fixed"), pos)
      assert not got.rows[i]["frozen"]
      np.testing.assert_allclose(got.curves["loss"][:, i], loss, rtol=1e-6, err_msg=str(spec))
      np.testing.assert_array_equal(got.curves["stage"][:, i], stage)
  if specs is MIXED:
    assert got.curves["stage"][-1, 0] == 2  # the curriculum reached its last stage


def test_compact_group_resumes_from_checkpoint_to_the_same_bits(tmp_path, mixed_run):
  """Stopped (and checkpointed) after its first dispatch, then rerun: the same curves
  and results."""
  ckpt = GroupCheckpoints(str(tmp_path / "ckpt"))
  with jax.enable_x64(True):
    with pytest.raises(train_group.Interrupted):
      _group(MIXED, _tcfg(), "learned", checkpoints=ckpt, checkpoint_every=K,
             hooks=STOP_AT_ONCE)
    assert 0 < ckpt.manager.latest_step() < STEPS
    again = _group(MIXED, _tcfg(), "learned", checkpoints=ckpt, checkpoint_every=K)
  np.testing.assert_array_equal(again.curves["loss"], mixed_run.curves["loss"])
  for a, b in zip(again.rows, mixed_run.rows):
    assert a["eval_loss"] == b["eval_loss"] or np.isnan(a["eval_loss"]) and np.isnan(
        b["eval_loss"])


DEVICES_SCRIPT = """
import jax, numpy as np
jax.config.update("jax_enable_x64", True)
from depthscale import tasks
from depthscale.core import train
from depthscale.core.ensemble import ModelSpec
from depthscale.sweep import train_group
specs = [ModelSpec(d, 8, 2, seed=s) for s in (0, 1) for d in (1, 2, 3, 4)]
tcfg = train.TrainConfig(batch_size=4, length=8, total_steps=10, layout="compact")
# khop: its sampler's scan starts from a constant carry (it once failed under shard_map);
# a task with a plain sampler adds no path of its own here
task = tasks.make("khop", k_max=2)
out = [train_group.train_group(task, specs, tcfg, steps_per_call=10, eval_size=8,
                               progress=False, model_options=dict(dtype="float64"),
                               devices=jax.local_devices()[:n])
       for n in (1, 4)]
np.testing.assert_allclose(out[1].curves["loss"], out[0].curves["loss"], rtol=1e-9)
print("ok", [r["devices"] for r in out[1].rows][0], out[0].curves["loss"][-1])
"""


@pytest.mark.slow
def test_four_devices_match_one():
  env = xla_env(4)
  p = subprocess.run([sys.executable, "-c", DEVICES_SCRIPT], cwd=ROOT, env=env,
                     capture_output=True, text=True, timeout=300)
  assert p.returncode == 0, p.stderr[-3000:]
  assert p.stdout.count("ok 4") == 1, p.stdout
