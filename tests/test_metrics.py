"""Held-out metrics: n*, per-position accuracy and retrieval's per-chain-position loss,
checked against direct numpy computations from the model's outputs."""
import jax
import numpy as np

from depthscale import tasks
from depthscale.core import ensemble, metrics
from depthscale.core.ensemble import ModelSpec
from depthscale.model import Transformer


def test_n_star_counts_leading_positions_above_threshold():
  acc = np.array([1.0, 1.0, 0.96, 0.94, 1.0])
  assert metrics.n_star(acc, np.ones(5, bool)) == 3
  assert metrics.n_star(acc, np.array([False, True, True, True, True])) == 2
  assert metrics.n_star(np.ones(4), np.ones(4, bool)) == 4
  assert metrics.n_star(np.array([0.5, 1.0]), np.ones(2, bool)) == 0


def _models(task, length, specs):
  cfg = ensemble.group_config(specs, max_len=task.seq_len(length),
                              output_dim=task.output_dim(length), vocab=task.input_vocab,
                              input_dim=task.input_dim)
  return cfg, ensemble.init_params(specs, cfg), ensemble.stack_arch(specs, cfg)


def test_per_position_accuracy_matches_numpy():
  task = tasks.make("khop", k=None, k_max=4)
  specs = [ModelSpec(1, 16, 2, seed=0), ModelSpec(2, 32, 4, seed=1)]
  cfg, params, arch = _models(task, 12, specs)
  batch = metrics.held_out(task, 12, 64)
  res = metrics.make_evaluate(task, cfg)(params, arch, batch)
  for m in range(2):
    p = jax.tree.map(lambda x: x[m], params)
    a = jax.tree.map(lambda x: x[m], arch)
    out = np.asarray(jax.jit(jax.vmap(
        lambda x: Transformer(cfg).apply({"params": p}, x, a)))(batch.inputs))
    correct = out.argmax(-1) == np.asarray(batch.targets)
    mask = np.asarray(batch.mask)
    want = (correct * mask).sum(0) / np.maximum(mask.sum(0), 1)
    np.testing.assert_allclose(np.asarray(res["per_position_acc"][m]), want, atol=1e-6)
    assert float(res["per_position_acc"][m][0]) == 0.0  # the k prefix is never counted
    # per-k accuracy: group the examples by the k that decode() reads off each string
    ks = np.array([task.decode(batch, i)["k"] for i in range(64)])
    for k in range(5):
      sel = ks == k
      want_k = (correct[sel] * mask[sel]).sum() / mask[sel].sum()
      np.testing.assert_allclose(float(res["per_level_acc"][m][k]), want_k, atol=1e-6)
  rows = metrics.summarize(res, np.asarray(batch.mask).any(0))
  for m, row in enumerate(rows):
    acc = np.asarray(res["per_level_acc"][m])
    assert row["k_star"] == metrics.k_star(acc)
    assert row["level_acc"] == " ".join(f"{a:.3f}" for a in acc)


def test_k_star_is_the_last_level_of_the_solved_prefix():
  assert metrics.k_star(np.array([1.0, 0.99, 0.96, 0.5, 0.97])) == 2
  assert metrics.k_star(np.array([0.9, 1.0])) == -1
  assert metrics.k_star(np.ones(5)) == 4
  assert metrics.k_star(np.array([1.0, 0.8]), threshold=0.75) == 1


def test_single_difficulty_tasks_have_no_levels():
  task = tasks.make("khop", k=2)
  cfg, params, arch = _models(task, 8, [ModelSpec(1, 16, 2)])
  res = metrics.make_evaluate(task, cfg)(params, arch, metrics.held_out(task, 8, 16))
  assert "per_level_acc" not in res
  assert "k_star" not in metrics.summarize(res, np.ones(8, bool))[0]


def test_retrieval_partial_losses_average_to_the_loss():
  task = tasks.make("retrieval", chains=2, dim=3)
  cfg, params, arch = _models(task, 4, [ModelSpec(1, 16, 2), ModelSpec(2, 16, 2, seed=3)])
  res = metrics.make_evaluate(task, cfg)(params, arch, metrics.held_out(task, 4, 32))
  chain = np.stack([np.asarray(res[f"eval_partial_loss_{i}"]) for i in range(1, 5)], 1)
  assert chain.shape == (2, 4)
  np.testing.assert_allclose(chain.mean(1), np.asarray(res["loss"]), rtol=1e-5)
