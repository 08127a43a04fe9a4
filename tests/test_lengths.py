"""Each model pays for the length it trains at (length buckets), and grows past the grid
(train.length_max) until its n* is measured (issue 49)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from depthscale import tasks
from depthscale.core import ensemble, lengths, program, train
from depthscale.core.ensemble import ModelSpec
from depthscale.io.checkpoint import GroupCheckpoints
from depthscale.sweep import train_group
from depthscale.tasks.base import Batch, Task

from test_stopping import _StopAfter

# one worker runs this module (make test: --dist loadgroup), so `grown` is trained once
pytestmark = pytest.mark.xdist_group("lengths")

SPECS = [ModelSpec(1, 16, 2, seed=0, lr=3e-3), ModelSpec(2, 16, 2, seed=1, lr=1e-2)]


def _train(tcfg, steps: int, k: int = 10):
  task = tasks.make("word_problem", group="S3")
  cfg = program.model_config(task, SPECS, tcfg, {"dtype": "float64"})
  state = train.init_state(ensemble.init_params(SPECS, cfg), tcfg)
  hp, arch = train.stack_hparams(SPECS), ensemble.stack_arch(SPECS, cfg)
  fn = program.make_train_chunk(task, cfg, tcfg, k)
  out = []
  for _ in range(steps // k):
    state, m = fn(state, hp, arch)
    out.append({n: np.asarray(m[n]) for n in ("loss", "stage", "paid")})
  return state, {n: np.concatenate([o[n] for o in out]) for n in out[0]}


def test_length_buckets_are_the_stages_positions_from_the_floor_to_the_full_length():
  task = tasks.make("word_problem", group="S3")
  tc = lambda **kw: train.TrainConfig(batch_size=4, length=128, total_steps=10, **kw)
  assert lengths.length_buckets(task, tc(curriculum="adaptive")) == (16, 32, 64, 128)
  assert lengths.length_buckets(task, tc(curriculum="adaptive", buckets=False)) == (128,)
  assert lengths.length_buckets(task, tc()) == (128,)
  grown = tc(curriculum="adaptive", length_max=300)
  assert grown.stages() == (2, 4, 8, 16, 32, 64, 128, 256, 300)
  assert lengths.length_buckets(task, grown) == (16, 32, 64, 128, 256, 300)
  assert lengths.length_buckets(task, tc(length_max=200)) == (128, 200)
  khop = tasks.make("khop")  # one position more than its length (the k token)
  assert lengths.length_buckets(khop, tc(curriculum="adaptive")) == (16, 17, 33, 65, 129)
  short = train.TrainConfig(batch_size=4, length=8, total_steps=10, curriculum="adaptive")
  assert lengths.length_buckets(task, short) == (8,)


def test_a_model_trained_through_bucket_changes_equals_it_at_the_full_length():
  """float64: the adaptive curriculum moves the models through stages 2..32 at their own
  pace; the bucketed program (16 positions, then 32) gives the numbers of the program
  that computes all 32 positions at every step."""
  tcfg = train.TrainConfig(batch_size=16, length=32, total_steps=60, curriculum="adaptive",
                           advance_at=0.25, clip_norm=0.0)
  with jax.enable_x64(True):
    got, m = _train(tcfg, 60)
    ref, r = _train(train.TrainConfig(**{**tcfg.__dict__, "buckets": False}), 60)
  assert set(np.unique(m["paid"])) == {16, 32}, np.unique(m["paid"])  # a bucket change
  assert np.all(r["paid"] == 32)
  changed = int(np.argmax(m["paid"][:, 0] == 32))
  assert 0 < changed < 60  # and then one model pays 32 positions for its stage of 16:
  assert np.any(m["stage"][changed:, 0] != m["stage"][changed:, 1])
  np.testing.assert_array_equal(m["stage"], r["stage"])
  rel = np.abs(m["loss"] - r["loss"]) / np.abs(r["loss"])
  assert rel.max() < 1e-9, rel.max()
  for a, b in zip(jax.tree.leaves(got.params), jax.tree.leaves(ref.params)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-8, atol=1e-12)


class PrefixCopy(Task):
  """Copy the input token at positions < `solvable`; past it the target is a fresh random
  token (nothing to learn). Prefix-consistent, so n* is `solvable` by construction for a
  model that learns the copy, at any length past it."""

  def __init__(self, solvable: int = 20, vocab: int = 8):
    self.name, self.loss, self.input_vocab, self.input_dim = "prefix_copy", "xent", vocab, None
    self.default_length, self.prefix_consistent, self.solvable = 8, True, solvable
    self._options = {"solvable": solvable, "vocab": vocab}

  def output_dim(self, length):
    return self.input_vocab

  def seq_len(self, length):
    return length

  def sample(self, key, batch_size, length):
    k1, k2 = jax.random.split(key)
    x = jax.random.randint(k1, (batch_size, length), 0, self.input_vocab, jnp.int32)
    noise = jax.random.randint(k2, (batch_size, length), 0, self.input_vocab, jnp.int32)
    y = jnp.where(jnp.arange(length)[None] < self.solvable, x, noise)
    return Batch(inputs=x, targets=y, mask=jnp.ones((batch_size, length), bool))

  def decode(self, batch, i):
    return {"inputs": np.asarray(batch.inputs[i]).tolist()}


GROWN = [ModelSpec(1, 32, 2, seed=0, lr=1e-3), ModelSpec(1, 32, 2, seed=1, lr=3e-4)]
GROWN_TCFG = train.TrainConfig(batch_size=64, length=8, total_steps=120, length_max=64,
                               advance_at=0.95)


def _grow(**kw):
  return train_group.train_group(PrefixCopy(20, vocab=16), GROWN, GROWN_TCFG,
                                 steps_per_call=10, eval_size=256, threshold=0.9,
                                 progress=False, **kw)


@pytest.fixture(scope="module")
def grown():
  return _grow()


def test_a_model_grows_past_the_grid_until_its_n_star_is_measured(grown):
  """Grid length 8, length_max 64: the copy is solved at 8 and 16, so each model grows to
  32, where positions 20.. are noise; it stays there, and its n* is measured at 20 on the
  held-out set at 64 (a model that did not grow would report the censored 8)."""
  for i, row in enumerate(grown.rows):
    assert row["trained_length"] == 32 and row["length"] == 8, row
    assert row["n_star"] == 20, row
    stage = grown.curves["stage"][:, i]
    assert list(np.unique(stage)) == [0, 1, 2]  # 8, 16, then 32 (never 64)
    assert np.all(np.diff(stage) >= 0)
    paid = grown.curves["paid"][:, i]
    assert row["positions_paid"] == paid.sum() < row["positions_full"] == 64 * 120
    assert row["positions_own"] == np.asarray([8, 16, 32])[stage.astype(int)].sum()


def test_a_resume_across_length_changes_gives_the_same_results(grown, tmp_path):
  """Stopped after the step-20 checkpoint (one model grown, the other not yet), resumed:
  the rows and curves of the uninterrupted run."""
  stage = grown.curves["stage"]
  assert stage[19].max() >= 1 and np.any(stage[20:] != stage[19])  # changes on both sides
  ckpt = GroupCheckpoints(str(tmp_path / "ckpt"))
  with pytest.raises(train_group.Interrupted):
    _grow(checkpoints=ckpt, checkpoint_every=20, hooks=_StopAfter(20))
  again = _grow(checkpoints=ckpt, checkpoint_every=20)
  for a, b in zip(grown.rows, again.rows):
    assert {k: v for k, v in a.items() if not k.endswith("_s")} == \
        {k: v for k, v in b.items() if not k.endswith("_s")}
  for name in grown.curves:
    np.testing.assert_array_equal(grown.curves[name], again.curves[name])


def test_the_full_length_accuracy_in_slices_equals_it_in_one_call():
  """Growth measures n* on the held-out set at length_max in slices of its examples
  (core/metrics.py): the exact 0/1 hit counts, so the same float32 accuracy per position
  as one call over the whole set, for any slice count (7 slices of 60 examples: the last
  padded with rows that count nowhere)."""
  from depthscale.core import metrics
  k1, k2 = jax.random.split(jax.random.key(3))
  inputs = jax.random.randint(k1, (60, 40), 0, 7, jnp.int32)
  mask = jax.random.bernoulli(k2, 0.8, (60, 40)).at[:, 0].set(False)  # position 0 never
  batch = Batch(inputs=inputs, targets=inputs, mask=mask)

  def evaluate(b):  # three "models", each right where its own rule says (as make_evaluate)
    m = b.mask.astype(jnp.float32)
    acc = [((b.inputs + i) % 3 != 0).astype(jnp.float32) for i in range(3)]
    return {"per_position_acc": jnp.stack([(a * m).sum(0) / jnp.maximum(m.sum(0), 1.0)
                                           for a in acc])}

  whole = np.asarray(evaluate(batch)["per_position_acc"])
  assert 0 < whole[:, 1:].min() < whole[:, 1:].max() < 1
  for chunks in (1, 7, 60, 100):
    got = metrics.per_position_acc_sliced(evaluate, batch, chunks)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, whole)


def test_a_checkpoint_from_before_length_buckets_resumes(grown, tmp_path):
  """A curriculum's checkpoint written before 99fdd67 (2026-11-27) has no `paid` curve. It resumes
  (it is not dropped for a restart from step 0): the same rows and curves as the
  uninterrupted run, except that its steps before the checkpoint count as paid at the
  full length (what the code then computed), since nothing recorded less."""
  ckpt = GroupCheckpoints(str(tmp_path / "now"))
  with pytest.raises(train_group.Interrupted):
    _grow(checkpoints=ckpt, checkpoint_every=20, hooks=_StopAfter(20))
  step = max(ckpt.manager.all_steps())  # the latest: what a resume reads
  payload = ckpt.manager.restore(step)  # as saved, then without `paid`: the old shape
  del payload["curves"]["paid"]
  old = GroupCheckpoints(str(tmp_path / "old"))
  old.save(step, payload)
  again = _grow(checkpoints=GroupCheckpoints(str(tmp_path / "old")), checkpoint_every=20)
  full = GROWN_TCFG.length_max
  for i, (a, b) in enumerate(zip(grown.rows, again.rows)):
    early = grown.curves["paid"][:step, i].sum()
    assert b["positions_paid"] == a["positions_paid"] - early + full * step, (a, b)
    assert {k: v for k, v in a.items() if not k.endswith("_s") and k != "positions_paid"} \
        == {k: v for k, v in b.items() if not k.endswith("_s") and k != "positions_paid"}
  for name in grown.curves:
    a, b = grown.curves[name], again.curves[name]
    if name == "paid":
      assert np.all(np.isnan(b[:step])) and a[:step].max() < full
      a, b = a[step:], b[step:]
    np.testing.assert_array_equal(a, b)
