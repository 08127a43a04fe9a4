"""Rebuilt programs (train.rebuild, sweep/resize.py): when slots go idle a group's program
is rebuilt smaller (or its idle compacted slots given to queued models of another depth);
a model trained through one or more rebuilds is the model trained alone (float64, as the
padded, compacted and refilled equivalence tests), a group interrupted after a rebuild
resumes to the same bits, and the cost model's decisions by hand."""
import jax
import numpy as np
import pytest

from depthscale import tasks
from depthscale.core.ensemble import ModelSpec
from depthscale.io.checkpoint import GroupCheckpoints
from depthscale.sweep import resize, train_group

from test_stopping import (EVAL, K, RULES, SPECS, STEPS, TASK, _StopAfter, _tcfg,
                           each_equals_alone)
from conftest import xla_env

# one worker runs this module (make test: --dist loadgroup), so its fixtures are made once
pytestmark = pytest.mark.xdist_group("rebuild")


class _Slots(_StopAfter):
  """Records the program size at each stopping check (and may ask to stop)."""

  def __init__(self, step=10**9):
    super().__init__(step)
    self.sizes = []

  def on_slots(self, summary):
    self.sizes.append((self.at, summary["slots"]))


def _group(specs, layout, rule="solved", slots=0, **kw):
  hooks = kw.pop("hooks", None) or _Slots()
  res = train_group.train_group(tasks.make(**TASK), specs, _tcfg(layout), steps_per_call=K,
                                eval_size=EVAL, progress=False, slots=slots,
                                model_options=dict(dtype="float64"), stop=RULES[rule],
                                rebuild_steps=1, hooks=hooks, **kw)
  return res, hooks.sizes


# A compacted queue of 2 slots, one of each depth: the depth-1 slot holds a model that
# never learns (lr 1e-5: the whole budget), the depth-2 model solves within steps, and two
# more depth-1 models queue. Without a rebuild they wait for the depth-1 slot (step 60).
RESHAPE = [ModelSpec(1, 16, 2, seed=20, lr=1e-5), ModelSpec(2, 16, 2, seed=21, lr=1e-2),
           ModelSpec(1, 16, 2, seed=22, lr=1e-2), ModelSpec(1, 16, 2, seed=23, lr=3e-3)]
# The deepest model solves first: the compacted program left is shallower (depths 3, 1)
# than the group's padded depth (4), with a band of two layers.
SHALLOWER = [ModelSpec(4, 16, 2, seed=30, lr=1e-2), ModelSpec(3, 16, 2, seed=31, lr=1e-5),
             ModelSpec(1, 16, 2, seed=32, lr=1e-5)]
CASES = {("shrink", "pad"): (SPECS, 0), ("shrink", "compact"): (SPECS, 0),
         ("reshape", "compact"): (RESHAPE, 2), ("shallower", "compact"): (SHALLOWER, 0)}


@pytest.fixture(scope="session")  # outlives the slow-first order (conftest)
def rebuilt():
  with jax.enable_x64(True):
    return {(case, layout): _group(specs, layout, slots=slots)
            for (case, layout), (specs, slots) in CASES.items()}


@pytest.mark.parametrize("case,layout", sorted(CASES))
def test_a_model_through_rebuilt_programs_is_the_model_trained_alone(rebuilt, case, layout):
  got, sizes = rebuilt[(case, layout)]
  specs = CASES[(case, layout)][0]
  if case == "shrink":  # the program shrank while models were still training
    assert got.rows[0]["models_in_program"] == 4 and sizes[0][1] < 4, sizes
    assert [r["stop"] for r in got.rows].count("budget") == 1  # trained after the rebuilds
  elif case == "shallower":
    assert got.rows[0]["stop"] == "solved" and sizes[-1][1] == 2, (got.rows, sizes)
    assert [r["stop"] for r in got.rows[1:]] == ["budget", "budget"]
  else:  # the depth-2 slot, left with no model of its depth, took a queued depth-1 model
    rows = got.rows
    assert rows[0]["trained_steps"] == STEPS and rows[1]["trained_steps"] < STEPS
    assert 0 < rows[2]["started_at"] < STEPS and rows[3]["started_at"] < STEPS, rows
  each_equals_alone(got, specs)


def test_a_rebuilt_group_resumes_to_the_same_bits(tmp_path, rebuilt):
  ref, sizes = rebuilt[("shrink", "pad")]
  at = next(step for step, n in sizes if n < 4)  # the first rebuild
  ckpt = GroupCheckpoints(str(tmp_path / "ckpt"))
  with jax.enable_x64(True):
    with pytest.raises(train_group.Interrupted) as stopped:
      _group(SPECS, "pad", checkpoints=ckpt, checkpoint_every=K, hooks=_Slots(at + 1))
    assert stopped.value.step > at
    again, sizes_again = _group(SPECS, "pad", checkpoints=ckpt, checkpoint_every=K)
  assert sizes_again[0][1] < 4 and sizes_again == sizes[-len(sizes_again):]  # rebuilt, as ref
  np.testing.assert_array_equal(again.curves["loss"], ref.curves["loss"])
  outcomes = lambda rows: [(r["stop"], r["trained_steps"], r["eval_loss"], r["n_star"])
                           for r in rows]
  np.testing.assert_equal(outcomes(again.rows), outcomes(ref.rows))  # the frozen model's
  # held-out loss may be nan in both (its parameters overflowed): equal, as assert_equal says


S = [ModelSpec(d, 16, 2, seed=i, lr=1e-3) for i, d in enumerate([1, 2, 3, 4, 1, 2])]


def test_the_cost_model_by_hand():
  # padded: slots cost alike; 2 of 4 idle over 100 steps is worth 50 steps
  assert resize.choose([3, -1, 5, -1], [S[0]] * 4, [], S, "pad", 1, 100, 50) == [3, 5]
  assert resize.choose([3, -1, 5, -1], [S[0]] * 4, [], S, "pad", 1, 100, 51) is None
  # 2 devices: one model left needs a filler beside it, which stays idle
  assert resize.choose([3, -1, -1, -1], [S[0]] * 4, [], S, "pad", 2, 100, 50) == [3]
  assert resize.choose([3, -1, -1, -1], [S[0]] * 4, [], S, "pad", 2, 100, 51) is None
  # compacted: a slot costs its layers + 1; waiting models fill idle slots, in queue order
  prog = [S[3], S[2], S[1], S[0]]  # depths 4, 3, 2, 1: costs 5, 4, 3, 2 of 14
  assert resize.choose([3, 2, -1, -1], prog, [5, 4], S, "compact", 1, 140, 50) == [3, 2, 5, 4]
  assert resize.choose([3, 2, -1, -1], prog, [], S, "compact", 1, 140, 50) == [3, 2]
  assert resize.choose([3, 2, -1, -1], prog, [], S, "compact", 1, 140, 51) is None
  assert resize.choose([3, 2, 1, 0], prog, [5], S, "compact", 1, 140, 1) is None  # none idle
  assert resize.choose([-1] * 4, prog, [], S, "compact", 1, 140, 1) is None  # the group ends


def test_what_a_rebuild_costs():
  assert resize.compile_steps("never", 0, 20.0, 0.1) is None
  assert resize.compile_steps("auto", 300, 20.0, 0.1) == 300
  assert resize.compile_steps("auto", 0, 20.0, 0.1) == 200  # plan.compile_s / step s
  assert resize.compile_steps("auto", 0, 20.0, 30.0) == 1


TWO_DEVICES = """
import json, sys
sys.path.insert(0, "tests")
import jax
from test_rebuild import _group, SPECS
assert len(jax.devices()) == 2
out = {}
with jax.enable_x64(True):
  for layout in ("pad", "compact"):
    res, sizes = _group(SPECS, layout)
    out[layout] = dict(sizes=sizes, loss=[[float(x) for x in c] for c in res.curves["loss"].T],
                       rows=[(r["stop"], r["trained_steps"], r["n_star"], r["eval_loss"])
                             for r in res.rows])
print(json.dumps(out))
"""


@pytest.mark.slow
def test_rebuilt_programs_on_two_devices_match_one(rebuilt):
  """The shrink on 2 forced CPU devices (the models axis sharded; a lone model keeps a
  filler beside it): the same stops and, in float64, the same curves as on 1 device."""
  import json
  import os
  import subprocess
  import sys
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = xla_env(2)
  p = subprocess.run([sys.executable, "-c", TWO_DEVICES], cwd=root, env=env,
                     capture_output=True, text=True, timeout=600)
  assert p.returncode == 0, p.stderr[-3000:]
  assert "4 -> 2 slots" in p.stderr
  got = json.loads(p.stdout.strip().splitlines()[-1])
  for layout in ("pad", "compact"):
    ref, _ = rebuilt[("shrink", layout)]
    two = got[layout]
    assert [tuple(r[:3]) for r in two["rows"]] == [
        (r["stop"], r["trained_steps"], r["n_star"]) for r in ref.rows]
    np.testing.assert_allclose([r[3] for r in two["rows"]],
                               [r["eval_loss"] for r in ref.rows], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(two["loss"]).T, ref.curves["loss"], rtol=1e-6)
