"""model.gelu (issue 60): `recompute`, a custom_vjp GELU whose backward keeps only its
input, computes what `xla` (autodiff of jax.nn.gelu, the tanh approximation) computes:
the same values, the same gradients to float64's rounding, the same training; it keeps
fewer of the MLP's [T, 4D] activations for the backward pass."""
import contextlib
import io
import os
import sys

import jax
import jax.ad_checkpoint
import jax.numpy as jnp
import numpy as np
import pytest

import lone
from depthscale import config, tasks
from depthscale.core import ensemble, program, train
from depthscale.core.ensemble import ModelSpec
from depthscale.model import Transformer, gelu as gelu_lib, transformer
from depthscale.sweep import study as study_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = ModelSpec(2, 32, 4, seed=0)  # hidden width 128: GELU on [T, 128] per layer
TASK = dict(name="khop", k=1)
TCFG = train.TrainConfig(batch_size=8, length=8, total_steps=10, clip_norm=0.0)


def _inputs(dtype):
  """Random inputs over GELU's curved range, its tails and zero."""
  x = np.random.default_rng(0).normal(size=4096) * 3
  edges = [0.0, 1e-3, -1e-3, 5.0, -5.0, 8.0, -8.0, 30.0, -30.0]
  return jnp.asarray(np.concatenate([x, edges]), dtype)


def test_recompute_gelu_equals_autodiffs_value_and_gradient():
  """float64: value and gradient equal jax.nn.gelu's under autodiff to 1e-12. float32
  and bfloat16: the same values, gradients in the input's dtype no further from float64's
  than autodiff's own (bfloat16: closer, the derivative computed in float32)."""
  with jax.enable_x64(True):
    x = _inputs(jnp.float64)
    grad = lambda f: jax.jit(jax.grad(lambda x: f(x).sum()))
    ref_y, ref_g = jax.nn.gelu(x), grad(jax.nn.gelu)(x)
    y, g = gelu_lib.gelu_recompute(x), grad(gelu_lib.gelu_recompute)(x)
    assert y.dtype == g.dtype == jnp.float64
    err_y, err_g = float(jnp.abs(y - ref_y).max()), float(jnp.abs(g - ref_g).max())
    print(f"margin gelu float64: value {err_y:.1e}, gradient {err_g:.1e} (< 1e-12)")
    assert err_y < 1e-12 and err_g < 1e-12
    for dtype in (jnp.float32, jnp.bfloat16):  # the derivative computed in float32
      xd = x.astype(dtype)
      gd = grad(gelu_lib.gelu_recompute)(xd)
      assert gd.dtype == dtype
      assert jnp.array_equal(gelu_lib.gelu_recompute(xd), jax.nn.gelu(xd))
      exact = grad(jax.nn.gelu)(xd.astype(jnp.float64))
      err = lambda g: float(jnp.abs(g.astype(jnp.float64) - exact).max())
      ours, xla = err(gd), err(grad(jax.nn.gelu)(xd))
      print(f"margin gelu {jnp.dtype(dtype).name} gradient error: recompute {ours:.1e}, "
            f"xla {xla:.1e}")
      assert ours <= 1.5 * xla, dtype


def _saved(f, *args) -> list[str]:
  """jax.ad_checkpoint.print_saved_residuals's lines: what f's backward pass keeps."""
  buf = io.StringIO()
  with contextlib.redirect_stdout(buf):
    jax.ad_checkpoint.print_saved_residuals(f, *args)
  return buf.getvalue().splitlines()


def test_recompute_gelu_keeps_only_its_input():
  """The custom_vjp's residuals are (x,), the input itself; autodiff's jax.nn.gelu keeps
  its intermediates too. In the model the layer then keeps two [T, 4D] arrays, the GELU's
  input and its output (mlp_out's weight gradient needs it), where xla keeps more."""
  x = _inputs(jnp.float32)
  y, residuals = gelu_lib._fwd(x)
  assert len(residuals) == 1 and residuals[0] is x
  assert jnp.array_equal(y, jax.nn.gelu(x))
  assert _saved(gelu_lib.gelu_recompute, x) == ["f32[4105] from the argument x"]
  assert len(_saved(jax.nn.gelu, x)) > 1
  kept = {}
  for name in gelu_lib.GELUS:
    cfg = transformer.ModelConfig(depth=1, width=32, heads=4, max_len=8, output_dim=5,
                                  vocab=7, gelu=name, remat="none", unroll="full")
    arch, tokens = transformer.arch_for(cfg, 1, 32, 4), jnp.arange(8) % 7
    params = Transformer(cfg).init(jax.random.key(0), tokens, arch)["params"]
    loss = lambda p: Transformer(cfg).apply({"params": p}, tokens, arch).sum()
    kept[name] = sum("[1,8,128]" in line for line in _saved(loss, params))
  print(f"margin gelu residuals: [T, 4D] arrays kept per layer {kept}")
  assert kept["recompute"] == 2 and kept["xla"] > 2


def _loss_and_grads(cfg, params_M, arch_M, batch):
  def loss(params, arch):
    out = jax.vmap(lambda x: Transformer(cfg).apply({"params": params}, x, arch))(batch.inputs)
    loss_BxT, _ = train.per_token_loss(out, batch.targets, "xent")
    return (loss_BxT * batch.mask).sum() / batch.mask.sum()
  return jax.jit(jax.vmap(jax.value_and_grad(loss)))(params_M, arch_M)


def test_recompute_gelu_trains_as_xla_in_float64():
  """float64: a model's loss and gradients (parameters scaled up so that the GELU's
  inputs cover its curved range) agree to 1e-12, and two training steps give the same
  losses and parameters."""
  task = tasks.make(**TASK)
  with jax.enable_x64(True):
    got = {}
    for name in gelu_lib.GELUS:
      options = dict(dtype="float64", pos="rotary", gelu=name)
      run = lone.run(task, SPEC, TCFG, 2, options, chunk=2)
      cfg = program.model_config(task, [SPEC], TCFG, options)
      params = jax.tree.map(lambda p: 10 * jnp.asarray(p), run.saved[0].params)
      batch = task.sample(jax.random.key(3), 8, TCFG.length)
      got[name] = (_loss_and_grads(cfg, params, ensemble.stack_arch([SPEC], cfg), batch),
                   np.asarray(run.loss[:2]), run.saved[2].params)
    (loss_x, grads_x), losses_x, params_x = got["xla"]
    (loss_r, grads_r), losses_r, params_r = got["recompute"]
    err = max(float(jnp.abs(a - b).max() / max(float(jnp.abs(b).max()), 1e-30))
              for a, b in zip(jax.tree.leaves(grads_r), jax.tree.leaves(grads_x)))
    step = max(float(np.abs(np.asarray(a) - np.asarray(b)).max())
               for a, b in zip(jax.tree.leaves(params_r), jax.tree.leaves(params_x)))
    print(f"margin gelu model float64: loss {float(jnp.abs(loss_r - loss_x).max()):.1e}, "
          f"gradients {err:.1e} (< 1e-12), trained parameters {step:.1e} (< 1e-12)")
    assert float(jnp.abs(loss_r - loss_x).max()) < 1e-12 and err < 1e-12
    np.testing.assert_allclose(losses_r, losses_x, rtol=1e-12)
    assert step < 1e-12


def test_gelu_is_a_checked_model_option_and_not_a_workdirs_identity():
  """model.gelu: xla by default, checked against GELUS, given to every group's models,
  and how the model is computed (a workdir reruns with the other); option_ablation.py
  A/Bs it."""
  smoke = "experiments/quickstart.py:smoke"
  base = study_lib.resolve(config.load(smoke))
  other = study_lib.resolve(config.load(smoke, ["model.gelu='recompute'"]))
  assert base.model_options()["gelu"] == "xla"
  assert other.model_options()["gelu"] == "recompute"
  assert study_lib.identity(base.config) == study_lib.identity(other.config)
  with pytest.raises(config.ConfigError, match="model.gelu"):
    study_lib.resolve(config.load(smoke, ["model.gelu='fast'"]))
  with pytest.raises(ValueError, match="unknown gelu"):
    gelu_lib.gelu("fast")
  sys.path.insert(0, os.path.join(ROOT, "tools", "gpu"))
  import option_ablation
  assert option_ablation.parse_variant("gelu recompute=gelu:recompute") == (
      "gelu recompute", {"gelu": "recompute"})
