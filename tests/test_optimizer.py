"""Weight decay applies to matrices by role (kernels, embedding, positional table), never
to LayerNorm scales/biases or biases, whatever their rank in the scanned parameter tree.

Checked on the optimizer's real update: with zero gradients and every parameter set to
one, AdamW's update is -lr * wd * p on a decayed leaf and exactly zero on any other.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from depthscale.core import ensemble, train

LAYER = "stack/layer/"
DECAYED = {"embed/embedding", "pos", "head/kernel"} | {
    LAYER + n + "/kernel" for n in ("q", "k", "v", "o", "mlp_in", "mlp_out")}
NOT_DECAYED = {"ln_f/scale", "ln_f/bias", "head/bias"} | {
    LAYER + n for n in ("ln1/scale", "ln1/bias", "ln2/scale", "ln2/bias", "o/bias",
                        "mlp_in/bias", "mlp_out/bias")}

CASES = {
    "standard": [ensemble.ModelSpec(depth=2, width=32, heads=4)],
    "padded mixed shapes": [ensemble.ModelSpec(depth=1, width=32, heads=2),
                            ensemble.ModelSpec(depth=3, width=64, heads=4, seed=1)],
    "looped": [ensemble.ModelSpec(depth=2, width=32, heads=4, repeats=3),
               ensemble.ModelSpec(depth=2, width=32, heads=4, repeats=1, seed=1)],
}


def path_name(path):
  return "/".join(str(getattr(k, "key", k)) for k in path)


def decayed_leaves(specs):
  cfg = ensemble.group_config(specs, max_len=8, output_dim=5, vocab=7)
  params_M = jax.tree.map(jnp.ones_like, ensemble.init_params(specs, cfg))
  tcfg = train.TrainConfig(batch_size=2, length=8, total_steps=10, clip_norm=0.0)
  tx = train.optimizer(tcfg)
  lr, wd = 0.5, 0.1

  def update(p):
    s = train.set_hyperparams(tx.init(p), lr, wd)
    u, _ = tx.update(jax.tree.map(jnp.zeros_like, p), s, p)
    return u

  updates_M = jax.jit(jax.vmap(update))(params_M)
  out = {}
  for path, u in jax.tree_util.tree_leaves_with_path(updates_M):
    u = np.asarray(u)
    if np.all(u == 0):
      out[path_name(path)] = False
    else:
      np.testing.assert_allclose(u, -lr * wd, rtol=1e-6, err_msg=path_name(path))  # decay only, every element
      out[path_name(path)] = True
  return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_exactly_the_matrices_are_decayed(case):
  got = decayed_leaves(CASES[case])
  assert set(got) == DECAYED | NOT_DECAYED, sorted(set(got) ^ (DECAYED | NOT_DECAYED))
  assert {k for k, v in got.items() if v} == DECAYED
  assert {k for k, v in got.items() if not v} == NOT_DECAYED


def test_continuous_inputs_decay_their_input_projection():
  spec = ensemble.ModelSpec(depth=1, width=16, heads=2)
  cfg = ensemble.group_config([spec], max_len=4, output_dim=3, input_dim=6, pos="none")
  mask = train.decay_mask(ensemble.init_params([spec], cfg))
  names = {path_name(p): v for p, v in jax.tree_util.tree_leaves_with_path(mask)}
  assert names["embed/kernel"] and not names["embed/bias"] and "pos" not in names
