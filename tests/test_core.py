"""The vmapped training core: padded groups train each model exactly as alone,
hyperparameters are data, non-finite models are isolated, and models really learn."""
import os
import subprocess
import sys

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from depthscale import tasks
from depthscale.core import chunks, ensemble, metrics, program, train
from depthscale.core.ensemble import ModelSpec

from conftest import FAST_COMPILE


def _group(task, specs, length, tcfg, pos="learned", dtype="float32"):
  cfg = ensemble.group_config(specs, max_len=task.seq_len(length),
                              output_dim=task.output_dim(length), vocab=task.input_vocab,
                              input_dim=task.input_dim, pos=pos, dtype=dtype)
  state = train.init_state(ensemble.init_params(specs, cfg), tcfg)
  return cfg, state, train.stack_hparams(specs), ensemble.stack_arch(specs, cfg)


def _train(task, specs, length, tcfg, chunks, k, pos="learned", dtype="float32"):
  cfg, state, hp, arch = _group(task, specs, length, tcfg, pos, dtype)
  fn = program.make_train_chunk(task, cfg, tcfg, k)
  losses = []
  for _ in range(chunks):
    state, m = fn(state, hp, arch)
    losses.append(np.asarray(m["loss"]))
  return cfg, state, np.concatenate(losses), arch


MIXED = [ModelSpec(2, 32, 4, seed=0), ModelSpec(1, 16, 2, seed=1, lr=3e-3),
         ModelSpec(3, 24, 2, seed=2, weight_decay=0.1), ModelSpec(2, 32, 2, seed=3, warmup=20),
         ModelSpec(1, 32, 8, seed=4)]
LOOPED = [ModelSpec(1, 32, 4, seed=0, repeats=3), ModelSpec(2, 16, 2, seed=1, repeats=2),
          ModelSpec(1, 32, 4, seed=2, repeats=1)]


@pytest.mark.parametrize("pos,specs", [("learned", MIXED), ("rotary", MIXED[2:4]),
                                       ("none", LOOPED)])
def test_padded_group_trains_each_model_as_alone(pos, specs):
  """In float64, so that the check is of the padding's exactness: in float32 the
  group and the lone model differ by rounding (summation order) from step 0, and
  training amplifies that to ~1e-5..1e-4 by step 200 (see BUILD_NOTES.md)."""
  task = tasks.make("word_problem", group="S3")
  chunks = 2  # 100 steps (rounding would show by then: BUILD_NOTES, Decisions)
  tcfg = train.TrainConfig(batch_size=16, length=8, total_steps=200, decay="cosine")
  with jax.enable_x64(True):
    cfg, state, losses_SxM, _ = _train(task, specs, 8, tcfg, chunks, 50, pos, "float64")
    alone = [_train(task, [spec], 8, tcfg, chunks, 50, pos, "float64") for spec in specs]
  for m, (spec, (_, alone, alone_S, _)) in enumerate(zip(specs, alone)):
    rel = np.abs(losses_SxM[:, m] - alone_S[:, 0]) / np.abs(alone_S[:, 0])
    assert rel.max() < 1e-5, (spec, rel.max())
    # padded parameters: exactly zero after 200 steps; true-shape ones match alone
    for got, ref in zip(jax.tree.leaves(state.params), jax.tree.leaves(alone.params)):
      got = np.asarray(got[m])
      inner = tuple(slice(0, s) for s in ref.shape[1:])
      padded = got.copy()
      padded[inner] = 0.0
      assert np.all(padded == 0.0), spec
      np.testing.assert_allclose(got[inner], np.asarray(ref[0]), atol=1e-3)
  assert losses_SxM.shape == (50 * chunks, len(specs))


# Two true shapes, one padded in depth, width and heads, the other twice (models 0 and 2:
# _assemble stacks by shape and puts them back in order), two looped shapes, vector
# inputs, a model computed another way. Each model is an eager init of seconds in the
# reference (BUILD_NOTES).
INIT_CASES = [(dict(vocab=16, max_len=24, output_dim=16),
               MIXED[:2] + [ModelSpec(2, 32, 4, seed=5)]),
              (dict(vocab=8, max_len=8, output_dim=8, pos="none"), LOOPED[:2]),
              (dict(input_dim=5, max_len=8, output_dim=3, compute_dtype="bfloat16"), MIXED[:2]),
              # how it is computed, not its parameters: one shared init (ensemble.init_config)
              (dict(vocab=8, max_len=8, output_dim=8, attention="dot_product", remat="block",
                    unroll="full", gelu="recompute"), [ModelSpec(2, 16, 2, seed=3)])]


def test_compiled_init_is_bitwise_the_init_op_by_op():
  """init_params compiles the init as one program; each model's parameters must be bit
  for bit those of flax's init of that model alone, run eagerly (as before 8778ff9, 2026-11-26):
  the recorded figures were made with it. At the product's XLA flags: under the suite's
  FAST_COMPILE (conftest) the two differ at the last bit, so then in a child process
  without it."""
  flags = os.environ.get("XLA_FLAGS", "").split()
  if FAST_COMPILE not in flags:
    for kw, specs in INIT_CASES:
      check_init(kw, specs)
    return
  env = dict(os.environ, DEPTHSCALE_TEST_OPTIMIZE="all",
             XLA_FLAGS=" ".join(f for f in flags if f != FAST_COMPILE))
  code = "import test_core; [test_core.check_init(*c) for c in test_core.INIT_CASES]"
  p = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(__file__), env=env,
                     capture_output=True, text=True, timeout=600)
  assert p.returncode == 0, p.stderr[-3000:]


def check_init(kw, specs):
  from depthscale.model import Transformer, arch_for
  cfg = ensemble.group_config(specs, **kw)
  got = jax.tree.map(np.asarray, ensemble.init_params(specs, cfg))
  dummy = (jnp.zeros((cfg.max_len,), jnp.int32) if cfg.vocab is not None
           else jnp.zeros((cfg.max_len, cfg.input_dim), jnp.float32))
  for m, spec in enumerate(specs):
    tcfg = ensemble.true_config(cfg, spec)
    tarch = arch_for(tcfg, spec.depth, spec.width, spec.heads, spec.repeats)
    key = ensemble.init_key(spec.seed)[None]
    ref = jax.vmap(lambda k: Transformer(tcfg).init(k, dummy, tarch)["params"])(key)
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
      r = np.asarray(r)[0]
      np.testing.assert_array_equal(g[m][tuple(slice(0, s) for s in r.shape)], r)


@pytest.mark.skipif(ensemble.init_depth(1) == 1, reason="keys without a prefix: one init a depth")
def test_one_compiled_init_serves_four_depths():
  """ensemble.init_depth: depths 1-4 share one compiled init, 5 takes a second, and each
  model's parameters are bit for bit those of flax's init compiled at its own depth (the
  layers' keys split at their index alone, drawn in a scan)."""
  from depthscale.model import Transformer, arch_for
  ensemble._init_at.clear_cache()
  for depth, programs in ((1, 1), (2, 1), (4, 1), (3, 1), (5, 2), (8, 2)):
    spec = ModelSpec(depth, 16, 2, seed=depth + 6)
    cfg = ensemble.group_config([spec], vocab=8, max_len=8, output_dim=8)
    got = ensemble.init_params([spec], cfg)
    assert ensemble._init_at._cache_size() == programs, depth
    arch = arch_for(cfg, depth, 16, 2, 1)
    ref = jax.jit(lambda k: Transformer(cfg).init(k, jnp.zeros((1,), jnp.int32), arch))(
        ensemble.init_key(spec.seed))["params"]
    chex.assert_trees_all_equal_shapes(got, jax.tree.map(lambda x: x[None], ref))
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
      np.testing.assert_array_equal(np.asarray(g)[0], np.asarray(r))


def test_models_in_chunks_train_as_all_at_once():
  """models_per_chunk runs the one vmapped step over chunks (lax.map): each model's
  losses and parameters are those of the all-at-once group (float64: only rounding may
  differ), and models land back in their own rows."""
  task = tasks.make("word_problem", group="S3")
  specs = MIXED[:3]
  assert [chunks.chunk_size(4, b) for b in (0, 1, 2, 3, 4, 9)] == [4, 1, 2, 2, 4, 4]
  with jax.enable_x64(True):
    out = {}
    for b in (0, 1):  # all at once; one model per chunk (3 chunks in a lax.map)
      tcfg = train.TrainConfig(batch_size=8, length=8, total_steps=30, models_per_chunk=b)
      out[b] = _train(task, specs, 8, tcfg, 1, 30, dtype="float64")
  _, ref, ref_loss, _ = out[0]
  assert np.ptp(ref_loss[-1]) > 0  # the models really differ
  for b in (1,):
    _, got, got_loss, _ = out[b]
    np.testing.assert_allclose(got_loss, ref_loss, rtol=1e-12)
    for a, r in zip(jax.tree.leaves(got.params), jax.tree.leaves(ref.params)):
      np.testing.assert_allclose(np.asarray(a), np.asarray(r), rtol=1e-9, atol=1e-12)


def test_changing_hyperparameters_never_recompiles():
  task = tasks.make("word_problem", group="S3")
  specs = [ModelSpec(1, 16, 2, seed=0), ModelSpec(1, 16, 2, seed=1)]
  tcfg = train.TrainConfig(batch_size=4, length=4, total_steps=10)
  cfg, state, hp, arch = _group(task, specs, 4, tcfg)
  fn = jax.jit(chex.assert_max_traces(program.chunk_fn(task, cfg, tcfg, 2), n=1))
  state, _ = fn(state, hp, arch)
  for lr, wd, warm in [(1e-2, 0.0, 5.0), (3e-5, 0.3, 0.0)]:
    hp2 = hp.replace(lr=jnp.full_like(hp.lr, lr), weight_decay=jnp.full_like(hp.lr, wd),
                     warmup=jnp.full_like(hp.lr, warm))
    state, m = fn(state, hp2, arch)
    np.testing.assert_allclose(m["lr"][-1], lr * (1 if warm == 0 else min(1, 4 / warm)),
                               rtol=1e-6)


@pytest.mark.parametrize("layout", ["pad", "compact"])
def test_the_train_loop_traces_its_step_once(layout, monkeypatch):
  """make_train_steps' loop needs its step's metric shapes before the loop; that shape
  pass and the loop's body share one trace of the step (a trace is most of a warm `run`'s
  build)."""
  traced = []
  kind = "make_step" if layout == "pad" else "make_compact_step"
  made = getattr(train, kind)

  def counted(*args, **kw):
    step = made(*args, **kw)

    def step_counted(*a):
      traced.append(1)
      return step(*a)
    return step_counted
  monkeypatch.setattr(train, kind, counted)
  task = tasks.make("word_problem", group="S3")
  specs = [ModelSpec(1, 16, 2, seed=0), ModelSpec(2, 16, 2, seed=1)]
  tcfg = train.TrainConfig(batch_size=4, length=4, total_steps=10, layout=layout)
  order, tcfg = program.arrange(specs, tcfg)
  specs = program.in_order(specs, order)
  cfg, state, hp, arch = _group(task, specs, 4, tcfg)
  program._train_steps(task, cfg, tcfg, 2, None).lower(state, hp, arch, np.int32(1))
  assert len(traced) == 1


def test_non_finite_model_is_frozen_and_others_unchanged():
  task = tasks.make("word_problem", group="S3")
  tcfg = train.TrainConfig(batch_size=8, length=8, total_steps=60, clip_norm=0.0)
  specs = [ModelSpec(2, 32, 4, seed=0), ModelSpec(1, 16, 2, seed=1), ModelSpec(2, 16, 2, seed=2)]
  bad = specs[:2] + [ModelSpec(2, 16, 2, seed=2, lr=1e30)]
  _, ref, ref_loss, arch = _train(task, specs, 8, tcfg, chunks=2, k=20)
  cfg, got, got_loss, _ = _train(task, bad, 8, tcfg, chunks=2, k=20)
  assert bool(got.frozen[2]) and not bool(got.frozen[:2].any()) and not bool(ref.frozen.any())
  assert not np.all(np.isfinite(got_loss[:, 2]))
  np.testing.assert_array_equal(got_loss[:, :2], ref_loss[:, :2])  # bit for bit
  for a, b in zip(jax.tree.leaves(got.params), jax.tree.leaves(ref.params)):
    np.testing.assert_array_equal(np.asarray(a[:2]), np.asarray(b[:2]))
    assert np.all(np.isfinite(np.asarray(a[2])))  # the frozen model keeps finite weights
  ev = metrics.make_evaluate(task, cfg)(got.params, arch, metrics.held_out(task, 8, 64))
  assert np.all(np.isfinite(np.asarray(ev["loss"])[:2]))  # eval of the others unaffected


@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.optimized  # executes far more than it compiles
def test_associative_recall_needs_two_layers():
  """k=1 (induction heads): the 2-layer models pass 95% per-token accuracy; the 1-layer
  models of the same width plateau far below. Margins under two XLA CPU configurations
  are in BUILD_NOTES.md (run with -s to print them)."""
  task = tasks.make("khop", k=1, alphabet=4)
  n = 32
  specs = [ModelSpec(d, 32, 2, seed=s, lr=3e-3) for s in (0, 1) for d in (1, 2)]
  tcfg = train.TrainConfig(batch_size=32, length=n, total_steps=1200)
  cfg, state, _, arch = _train(task, specs, n, tcfg, chunks=12, k=100)
  batch = metrics.held_out(task, n, 1000)
  ev = metrics.make_evaluate(task, cfg)(state.params, arch, batch)
  acc = np.asarray(ev["per_position_acc"]).mean(1)
  one_layer, two_layer = acc[0::2], acc[1::2]
  print(f"margin recall: 2-layer min {two_layer.min():.4f} (>= 0.95), 1-layer max "
        f"{one_layer.max():.4f} (< 0.9), gap {two_layer.min() - one_layer.max():.4f} (> 0.08)")
  assert two_layer.min() >= 0.95, acc
  assert one_layer.max() < 0.9 and two_layer.min() - one_layer.max() > 0.08, acc


@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.optimized  # executes far more than it compiles
def test_word_problem_learns_short_lengths_with_curriculum():
  """Z_5 with the adaptive length curriculum 2 -> 4 -> 8, four models (seeds 0-1 x lr
  1e-3, 3e-3): every model passes the length-2 stage and learns the first 3 positions
  (position 3 is trained only from the length-4 stage on) far above chance (0.2), and a
  majority (3 of 4) reach the last stage. Not n* at the edge, nor every model through
  every stage: past position 3 learning at this size is chaotic, and which model stalls
  at length 4 depends on the CPU's rounding (one of two did on an AVX-512 EPYC, issue 50;
  margins per instruction-set cap in BUILD_NOTES)."""
  task = tasks.make("word_problem", group="Z5")
  specs = [ModelSpec(2, 32, 4, seed=s, lr=lr) for s in (0, 1) for lr in (1e-3, 3e-3)]
  tcfg = train.TrainConfig(batch_size=32, length=8, total_steps=2000, decay="cosine",
                           curriculum="adaptive", advance_at=0.97)
  cfg, state, _, arch = _train(task, specs, 8, tcfg, chunks=20, k=100)
  batch = metrics.held_out(task, 8, 1000)
  acc_MxT = np.asarray(metrics.make_evaluate(task, cfg)(state.params, arch, batch)
                       ["per_position_acc"])
  stages = np.asarray(state.stage)
  first3 = acc_MxT[:, :3].min()
  print(f"margin word problem: stages {stages} (>= 1 each, 2 for >= 3 of 4: "
        f"{int(np.sum(stages == 2))}), min accuracy over positions 1-3 {first3:.4f} (>= 0.95), "
        f"n* {[metrics.n_star(a, np.ones(8, bool)) for a in acc_MxT]}")
  assert np.all(stages >= 1)  # every model through length 2
  assert np.sum(stages == 2) >= 3  # a majority through length 4
  assert first3 >= 0.95, acc_MxT


def test_runs_ask_xla_for_reproducible_numbers(monkeypatch):
  """The runner's settings for GPU/TPU determinism: deterministic scatter-add, float32
  matmuls at full precision (no TF32), the partitionable PRNG; a user's XLA_FLAGS kept."""
  from depthscale.sweep import study
  monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=AVX2")
  before = {k: getattr(jax.config, k) for k in ("jax_default_matmul_precision",
                                                  "jax_threefry_partitionable")}
  try:
    study.reproducible_xla()
    assert os.environ["XLA_FLAGS"].split() == ["--xla_cpu_max_isa=AVX2",
                                               "--xla_gpu_deterministic_ops=true"]
    assert jax.config.jax_default_matmul_precision == "highest"
    assert jax.config.jax_threefry_partitionable
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_deterministic_ops=false")
    study.reproducible_xla()  # the user's explicit choice wins
    assert os.environ["XLA_FLAGS"] == "--xla_gpu_deterministic_ops=false"
  finally:
    for k, v in before.items():
      jax.config.update(k, v)


def test_a_bounded_jit_keeps_at_most_its_bound_of_executables():
  """compiled.bounded: the init, the optimizer init and a slot's refill compile one
  program per group shape; a worker with hundreds of groups must not keep them all (each
  executable holds memory maps: BUILD_NOTES, Decisions)."""
  from depthscale.core import compiled
  fn = jax.jit(lambda x: x * 2.0)
  for n in range(1, 8):
    out = compiled.bounded(fn, keep=3)(jnp.ones((n,)))
    assert fn._cache_size() <= 3
    np.testing.assert_array_equal(out, np.full((n,), 2.0))
  assert fn._cache_size() >= 1
