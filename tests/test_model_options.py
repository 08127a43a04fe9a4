"""The study's model options: compute_dtype (bfloat16 matmuls, float32 where it matters),
attention (einsum or jax.nn.dot_product_attention, padding-exact both) and remat (same
numbers, less memory: tools/bench/remat_memory.py)."""
import jax
import jax.extend.core as jex
import jax.numpy as jnp
import numpy as np
import pytest

from depthscale import config, tasks
from conftest import planned
from depthscale.core import ensemble, program, train
from depthscale.core.ensemble import ModelSpec
from depthscale.model import Transformer, sums, transformer
from depthscale.sweep import study as study_lib

# Padded mixed shapes: model 1 has 2 of the group's 8 heads, 6 of its 8 head units and
# 12 of its 32 residual units; model 2 head size 4 of 8. One layer each: compiles faster.
MIXED = [ModelSpec(1, 32, 4, seed=0), ModelSpec(1, 12, 2, seed=1), ModelSpec(1, 32, 8, seed=2)]


def _eqns(jaxpr):
  """Every equation of a jaxpr, nested ones (scan bodies, remat) included."""
  for e in jaxpr.eqns:
    yield e
    for sub in jex.jaxprs_in_params(e.params):
      yield from _eqns(sub)


def _group(task, specs, length, seed=0, **model):
  """A padded group with random parameters, zero beyond each model's true shape as
  ensemble.init_params leaves them (numpy: that init compiles for a long while)."""
  cfg = ensemble.group_config(specs, max_len=task.seq_len(length),
                              output_dim=task.output_dim(length), vocab=task.input_vocab,
                              input_dim=task.input_dim, **model)
  rng = np.random.default_rng(seed)

  def fill(path, padded, *true):
    name = path[-1].key
    out = np.zeros((len(specs),) + padded.shape, padded.dtype)
    for m, t in enumerate(true):
      x = rng.normal(size=t.shape)
      out[(m,) + tuple(slice(0, n) for n in t.shape)] = (
          1 + 0.2 * x if name == "scale" else 0.2 * x if name == "bias" else 0.3 * x)
    return jnp.asarray(out)
  true = [_shapes(ensemble.true_config(cfg, s), s) for s in specs]
  params_M = jax.tree_util.tree_map_with_path(fill, _shapes(cfg, specs[0], padded=True), *true)
  return cfg, params_M, ensemble.stack_arch(specs, cfg)


def _shapes(cfg, spec, padded=False):
  """The parameter shapes of `cfg` (traced only)."""
  shape = (cfg.depth, cfg.width, cfg.heads, cfg.repeats) if padded else spec.shape()
  arch = transformer.arch_for(cfg, *shape)
  return jax.eval_shape(lambda k: Transformer(cfg).init(
      k, jnp.zeros((cfg.max_len,), jnp.int32), arch)["params"], jax.random.key(0))


def _apply(cfg, params, arch, x_BxT):
  """One model's outputs on a batch."""
  return jax.vmap(lambda x: Transformer(cfg).apply({"params": params}, x, arch))(x_BxT)


def _loss_and_grads(cfg, params_M, arch_M, batch, jit=True):
  """Per-model loss on one batch, outputs, and gradients (the train step's loss)."""
  def loss(params, arch):
    out = _apply(cfg, params, arch, batch.inputs)
    loss_BxT, _ = train.per_token_loss(out, batch.targets, "xent")
    return (loss_BxT * batch.mask).sum() / batch.mask.sum(), out

  fn = jax.vmap(jax.value_and_grad(loss, has_aux=True))
  return (jax.jit(fn) if jit else fn)(params_M, arch_M)


@pytest.mark.parametrize("attention", ["einsum", "dot_product"])
def test_bfloat16_computes_matmuls_in_bfloat16_and_the_rest_in_float32(attention,
                                                                         monkeypatch):
  """The precision policy, read off the traced train-step loss and its gradients: every
  matmul of the layers multiplies bfloat16 numbers (a float32 operand only with the
  BF16_BF16_F32 algorithm, which rounds it to bfloat16 and accumulates in float32); the
  head, attention logits, softmax, layer-norm statistics, rotary angles and the loss are
  float32, and so are the outputs and gradients. The statistics' sums as matmuls (a
  CPU's, model/sums.py) add float32 matmuls only."""
  task = tasks.make("khop", k=1)
  cfg, params_M, arch_M = _group(task, MIXED, 8, pos="rotary", compute_dtype="bfloat16",
                                 attention=attention)
  batch = task.sample(jax.random.key(0), 2, 8)
  step = lambda p, a: _loss_and_grads(cfg, p, a, batch, jit=False)

  def traced(dots_for_sums):  # traces anew (the layer scan's body trace is cached)
    monkeypatch.setattr(sums, "as_dots", lambda platform=None: dots_for_sums)
    jax.clear_caches()
    eqns = list(_eqns(jax.make_jaxpr(step)(params_M, arch_M).jaxpr))
    return eqns, [(tuple(str(v.aval.dtype) for v in e.invars), str(e.params["precision"]))
                  for e in eqns if e.primitive.name == "dot_general"]
  eqns, dots = traced(False)
  with_sums = traced(True)[1]  # last: what stays cached is this machine's own path
  head = [d for d in dots if d[0] == ("float32", "float32")]
  assert len(head) == 3, dots  # the head: forward and its two backward matmuls
  extra = list(with_sums)
  for d in dots:
    extra.remove(d)
  assert extra and all(d[0] == ("float32", "float32") for d in extra), extra
  bf16_f32 = str(jax.lax.DotAlgorithmPreset.BF16_BF16_F32)
  for operands, precision in dots:
    assert operands in {("bfloat16", "bfloat16"), ("float32", "float32")} or (
        "bfloat16" in operands and precision == bf16_f32), (operands, precision)
  logits = [e for e in eqns if e.primitive.name == "dot_general"
            and e.params["preferred_element_type"] == jnp.float32
            and str(e.invars[0].aval.dtype) == "bfloat16"]
  assert logits, "attention logits are accumulated and returned in float32"
  for name in ("exp", "cos", "sin", "rsqrt", "log"):
    got = {str(e.outvars[0].aval.dtype) for e in eqns if e.primitive.name == name}
    assert got == {"float32"}, (name, got)
  (loss, out), grads = jax.eval_shape(step, params_M, arch_M)
  assert loss.dtype == out.dtype == jnp.float32
  assert {g.dtype for g in jax.tree.leaves(grads)} == {jnp.dtype("float32")}


def _study(compute_dtype):
  """Associative recall (1-hop), two seeds of one 2-layer model, as a study sets it."""
  c = config.defaults()
  c.task, c.task_options = "khop", {"k": 1}
  c.grid.update(dict(depth=[2], width=[32], seed=[0, 1], lr=[3e-3], length=[16]))
  c.model.update(dict(heads=2, compute_dtype=compute_dtype))
  c.train.update(dict(batch_size=32, steps=300, steps_per_call=100))
  c.checkpoint_every = 300
  return c


@pytest.mark.learning
@pytest.mark.optimized  # executes far more than it compiles
def test_bfloat16_study_tracks_float32_on_associative_recall():
  """model.compute_dtype=bfloat16 through the study's path (validate, plan, model
  options, group config): 300 steps of associative recall from the same initial state
  track the float32 run, and the model that forms its induction head does so in both.
  The program is test_core's bfloat16 test's: one compile per session (shared cache)."""
  curves, start = {}, None
  for ct in ("float32", "bfloat16"):
    c = _study(ct)
    st = study_lib.resolve(c)
    task, (g,) = planned(c)
    tcfg = st.train_config(length=g.length)
    if start is None:  # float32: the group as a sweep builds it
      cfg = program.model_config(task, g.specs, tcfg, st.model_options())
      state, hp, arch = program.init_inputs(g.specs, cfg, tcfg, jax.local_devices())
      start = jax.tree.map(jnp.copy, state)  # the chunk donates its state
    else:  # the same float32 parameters: compute_dtype changes no parameter
      cfg, state = program.model_config(task, g.specs, tcfg, st.model_options()), start
    assert cfg.compute_dtype == (None if ct == "float32" else "bfloat16")
    state, m = program.make_train_chunk(task, cfg, tcfg, c.train.steps)(state, hp, arch)
    assert {x.dtype for x in jax.tree.leaves(state.params)} == {jnp.dtype("float32")}
    assert m["loss"].dtype == jnp.float32
    curves[ct] = np.asarray(m["loss"]).reshape(12, 25, -1).mean(1)  # 25-step means
  f32, bf16 = curves["float32"], curves["bfloat16"]
  diff = np.abs(bf16 - f32).max()
  learnt = {k: (v[-1] / v[0]).min() for k, v in curves.items()}
  print(f"margin bf16 study: max |bf16 - f32| of 25-step mean losses {diff:.3f} (< 0.25); "
        f"end/start of the model that learns: bf16 {learnt['bfloat16']:.3f}, "
        f"f32 {learnt['float32']:.3f} (< 0.2)")
  assert not np.array_equal(f32, bf16)  # the matmuls really ran in bfloat16
  assert diff < 0.25
  assert learnt["bfloat16"] < 0.2 and learnt["float32"] < 0.2


@pytest.mark.parametrize("kernel", ["dot_product", "cudnn"])
@pytest.mark.parametrize("dtype,tol", [("float32", 1e-5), ("float64", 3e-6)])
def test_dot_product_attention_equals_einsum_and_keeps_padding_exact(dtype, tol, kernel):
  """jax.nn.dot_product_attention computes what the einsum path computes (its softmax is
  float32 even for float64 inputs: hence the float64 tolerance) in a padded mixed-shape
  group with rotary positions: outputs, and in float32 losses and gradients too. Padded
  heads and head units are exact: their gradients are exactly zero, and a padded model
  outputs what its true shape outputs (to the float32 softmax's rounding: XLA's exp may
  differ by an ulp from one program to another). `cudnn` here: its fallback for float32
  and float64 inputs (the XLA kernel, the per-model scale folded into q)."""
  task = tasks.make("khop", k=1)
  grads = dtype == "float32"  # float64: outputs only (each gradient program compiles ~3 s)
  with jax.enable_x64(dtype == "float64"):
    batch = task.sample(jax.random.key(1), 4, 8)
    got = {}
    for attention in ("einsum", kernel):
      cfg, params_M, arch_M = _group(task, MIXED, 8, pos="rotary", dtype=dtype,
                                     attention=attention)
      if grads:
        got[attention] = jax.tree.map(np.asarray,
                                      _loss_and_grads(cfg, params_M, arch_M, batch))
      else:
        out = jax.jit(jax.vmap(lambda p, a: _apply(cfg, p, a, batch.inputs)))(params_M, arch_M)
        got[attention] = ((np.zeros(1), np.asarray(out)), {})
    s = MIXED[1]
    tcfg = ensemble.true_config(cfg, s)
    alone = jax.tree.map(lambda v, like: v[1][tuple(slice(0, n) for n in like.shape)],
                         params_M, _shapes(tcfg, s))
    alone_out = np.asarray(jax.jit(lambda p: _apply(
        tcfg, p, transformer.arch_for(tcfg, s.depth, s.width, s.heads), batch.inputs))(alone))
  (loss_e, out_e), grads_e = got["einsum"]
  (loss_d, out_d), grads_d = got[kernel]
  assert out_d.dtype == np.dtype(dtype)
  rel = lambda a, b: np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)
  err = max([rel(out_d, out_e), rel(loss_d, loss_e)] +
            [rel(a, b) for a, b in zip(jax.tree.leaves(grads_d), jax.tree.leaves(grads_e))])
  pad_err = rel(out_d[1], alone_out)
  pad_tol = {"float32": 1e-5, "float64": 1e-6}[dtype]
  print(f"margin {kernel} vs einsum ({dtype}): max relative difference {err:.2e} "
        f"(< {tol}); padded vs true shape {pad_err:.2e} (< {pad_tol})")
  assert err < tol and pad_err < pad_tol
  if grads:
    q = grads_d["stack"]["layer"]["q"]["kernel"]  # [M, depth, D, H, K]
    assert np.all(q[1, :, :, 2:] == 0) and np.all(q[1, :, :, :, 6:] == 0)  # heads, units
    assert np.all(q[1, :, 12:] == 0) and np.all(q[2, :, :, :, 4:] == 0)  # width, units
    assert np.abs(q[1, :, :12, :2, :6]).min() > 0  # the true ones do learn


@pytest.mark.parametrize("backend", ["cpu", "gpu", "tpu"])
def test_auto_settings_are_the_devices_fastest(backend, monkeypatch):
  """`auto` resolved for each backend (BUILD_NOTES, the one-model step): on a GPU cuDNN's
  flash attention where it applies (bf16/f16, head size a multiple of 8 up to 128) and XLA's
  kernel otherwise (and always under deterministic GPU ops, which cuDNN's flash backward
  failed under); every stack unrolled on an accelerator, remat=block on a TPU only; on a
  CPU einsum, no remat, stacks unrolled up to CPU_UNROLL_DEPTH. An explicit choice always
  wins."""
  monkeypatch.setattr(jax, "default_backend", lambda: backend)
  monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_deterministic_ops=false")
  bf16, f32 = jnp.bfloat16, jnp.float32
  want = {"cpu": ("einsum", "einsum", "einsum", "none"),
          "gpu": ("cudnn", "dot_product", "dot_product", "none"),
          "tpu": ("einsum", "einsum", "einsum", "block")}[backend]
  assert (transformer.attention_impl("auto", bf16, 64), transformer.attention_impl("auto", f32, 64),
          transformer.attention_impl("auto", bf16, 12), transformer.remat_policy("auto")) == want
  assert transformer.attention_impl("auto", bf16, 256) == ("dot_product" if backend == "gpu"
                                                           else "einsum")
  deep = transformer.unroll_layers("auto", transformer.CPU_UNROLL_DEPTH + 1, "auto")
  shallow = transformer.unroll_layers("auto", transformer.CPU_UNROLL_DEPTH, "auto")
  assert (deep, shallow) == ((False, True) if backend == "cpu" else (True, True))
  assert not transformer.unroll_layers("auto", 2, "block") or backend != "cpu"
  for name, fn in (("einsum", transformer.attention_impl), ("none", transformer.remat_policy)):
    assert fn(name) == name
  assert not transformer.unroll_layers("none", 2, "none")
  assert transformer.unroll_layers("full", 24, "block")
  assert transformer.remat_policy("auto", "gpu") == "none"  # a plan's target platform
  assert transformer.remat_policy("auto", "tpu") == "block"
  assert transformer.remat_policy("auto", "cpu") == "none"
  monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_deterministic_ops=true")  # as `depthscale run`
  assert transformer.attention_impl("auto", bf16, 64) == want[1]
  assert transformer.attention_impl("cudnn", bf16, 64) == "cudnn"


@pytest.mark.skipif(jax.default_backend() != "gpu",
                    reason="cuDNN's attention kernel runs only on a GPU (its CPU fallback, "
                           "the XLA kernel, is tested beside einsum above)")
def test_cudnn_attention_equals_einsum_on_a_gpu():
  """bfloat16 q, k, v with a per-model traced scale, vmapped over models and batch as the
  engine runs it: outputs and gradients of cuDNN's kernel against einsum within bf16's
  rounding."""
  ks = jax.random.split(jax.random.key(0), 4)
  q, k, v, w = (jax.random.normal(x, (3, 4, 128, 8, 64), jnp.float32) for x in ks)
  head_dim = jnp.asarray([64.0, 48.0, 64.0])

  def loss(kernel):
    def per_model(q, k, v, w, hd):
      o = jax.vmap(lambda a, b, c: transformer.causal_attention(a, b, c, hd, kernel))(
          q.astype(jnp.bfloat16), k.astype(jnp.bfloat16), v.astype(jnp.bfloat16))
      return jnp.sum(o.astype(jnp.float32) * w)
    return jax.jit(jax.vmap(jax.value_and_grad(per_model, argnums=(0, 1, 2))))
  (l_c, g_c), (l_e, g_e) = (loss(x)(q, k, v, w, head_dim) for x in ("cudnn", "einsum"))
  np.testing.assert_allclose(l_c, l_e, rtol=2e-2)
  for a, b in zip(g_c, g_e):
    assert float(jnp.max(jnp.abs(a - b))) < 0.05 * float(jnp.max(jnp.abs(b)))


# A looped group of 3-layer blocks: without remat the layer scan is unrolled, with it not.
REMAT = [ModelSpec(3, 32, 4, seed=0, repeats=2), ModelSpec(2, 16, 2, seed=1, repeats=1)]


def test_remat_gives_the_same_losses_and_gradients_in_less_memory():
  """remat="block" recomputes each layer in the backward pass: same loss and gradients
  as without (the same operations; only fusion may round differently), and XLA's
  compiled program holds fewer live intermediates (tools/bench/remat_memory.py measures a
  representative group)."""
  task = tasks.make("khop", k=1)
  batch = task.sample(jax.random.key(3), 16, 8)
  got, temp = {}, {}
  for remat in ("none", "block"):
    cfg, params_M, arch_M = _group(task, REMAT, 8, pos="rotary", remat=remat)
    step = lambda p, a: _loss_and_grads(cfg, p, a, batch, jit=False)
    compiled = jax.jit(step).lower(params_M, arch_M).compile()
    temp[remat] = compiled.memory_analysis().temp_size_in_bytes
    got[remat] = jax.tree.map(np.asarray, compiled(params_M, arch_M))
  (loss_n, _), grads_n = got["none"]
  (loss_b, _), grads_b = got["block"]
  loss_err = np.abs(loss_b - loss_n).max() / np.abs(loss_n).max()
  err = max(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)
            for a, b in zip(jax.tree.leaves(grads_b), jax.tree.leaves(grads_n)))
  print(f"margin remat: relative loss difference {loss_err:.2e} (< 1e-6), gradients "
        f"{err:.2e} (< 1e-5); temp bytes {temp['none']} -> {temp['block']}")
  assert loss_err < 1e-6 and err < 1e-5
  assert temp["block"] < temp["none"]


def _autodiff_layer_norm(x, scale, bias, mask, eps=1e-5):
  """The masked LayerNorm as plain jnp, differentiated by JAX: the reference for the
  written-out backward pass (transformer._norm_bwd)."""
  n, mask, scale, bias = jnp.sum(mask), mask[None], scale[None], bias[None]
  mean = jnp.sum(x * mask, -1, keepdims=True) / n
  c = (x - mean) * mask
  var = jnp.sum(c * c, -1, keepdims=True) / n
  return c * jax.lax.rsqrt(var + eps) * scale + bias * mask


@pytest.mark.parametrize("dots", [True, False])
def test_sums_equal_numpys_either_way(dots, monkeypatch):
  """model/sums.py, as matmuls (a CPU's) and as reductions (an accelerator's), vmapped over
  a batch as the model runs them: the sums numpy computes in float64."""
  monkeypatch.setattr(sums, "as_dots", lambda platform=None: dots)
  with jax.enable_x64(True):
    ks = jax.random.split(jax.random.key(9), 3)
    x, y = (jax.random.normal(k, (3, 5, 7), jnp.float64) for k in ks[:2])
    w = jax.random.normal(ks[2], (7,), jnp.float64)
    xn, yn, wn = np.asarray(x), np.asarray(y), np.asarray(w)
    np.testing.assert_allclose(jax.vmap(sums.row_dot, (0, None))(x, w),
                               (xn * wn).sum(-1, keepdims=True), rtol=1e-13)
    np.testing.assert_allclose(jax.vmap(sums.pair_dot)(x, y), (xn * yn).sum(-1), rtol=1e-13)
    np.testing.assert_allclose(sums.column_sum(x), xn.sum((0, 1)), rtol=1e-13)
    np.testing.assert_allclose(jax.vmap(sums.column_sum)(x), xn.sum(1), rtol=1e-13)


def test_sums_are_matmuls_on_a_cpu_only():
  assert sums.as_dots("cpu") and not sums.as_dots("gpu") and not sums.as_dots("tpu")


@pytest.mark.parametrize("dots", [True, False])
@pytest.mark.parametrize("active", [16, 11])
def test_layer_norm_backward_is_autodiffs(active, dots, monkeypatch):
  """float64, a full and a padded width (5 units masked), under vmap over a batch (as the
  model runs it), with its sums as matmuls (a CPU's) and as reductions (an
  accelerator's): values and the gradients of x, scale and bias equal autodiff's of the
  plain formula to rounding; padded units get exactly zero gradient."""
  monkeypatch.setattr(sums, "as_dots", lambda platform=None: dots)
  with jax.enable_x64(True):
    k1, k2, k3, k4 = jax.random.split(jax.random.key(3), 4)
    x = jax.random.normal(k1, (4, 7, 16), jnp.float64) * 3 + 1
    scale = 1 + 0.1 * jax.random.normal(k2, (16,), jnp.float64)
    bias = 0.1 * jax.random.normal(k3, (16,), jnp.float64)
    mask = (jnp.arange(16) < active).astype(jnp.float64)
    w = jax.random.normal(k4, (4, 7, 16), jnp.float64)
    def loss(fn):
      return lambda x, s, b: jnp.sum(jnp.sin(jax.vmap(lambda r: fn(r, s, b, mask))(x)) * w)
    got = jax.value_and_grad(loss(transformer.masked_layer_norm), argnums=(0, 1, 2))(
        x, scale, bias)
    want = jax.value_and_grad(loss(_autodiff_layer_norm), argnums=(0, 1, 2))(x, scale, bias)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
    for g, r in zip(got[1], want[1]):
      np.testing.assert_allclose(g, r, rtol=1e-11, atol=1e-13)
    if active < 16:
      assert np.all(np.asarray(got[1][0])[..., active:] == 0)
      assert np.all(np.asarray(got[1][1])[active:] == 0)


def _autodiff_attention(q, k, v, scale):
  """The einsum attention as plain jnp, differentiated by JAX: the reference for the
  written-out backward pass (model/attention.py)."""
  wide = jnp.promote_types(q.dtype, jnp.float32)
  bf16 = jax.lax.DotAlgorithmPreset.BF16_BF16_F32 if q.dtype == jnp.bfloat16 else None
  t = q.shape[0]
  logits = jnp.einsum("thk,shk->hts", q, k, preferred_element_type=wide, precision=bf16)
  logits = jnp.where(jnp.tril(jnp.ones((t, t), bool)), logits * scale.astype(wide),
                     jnp.finfo(wide).min)
  return jnp.einsum("hts,shk->thk", jax.nn.softmax(logits, axis=-1).astype(v.dtype), v)


@pytest.mark.parametrize("dots", [True, False])
@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float32", 2e-5),
                                       ("bfloat16", 3e-2)])
def test_einsum_attention_backward_is_autodiffs(dtype, tol, dots, monkeypatch):
  """Values and the gradients of q, k and v, vmapped over a batch (as the model runs it),
  with two padded heads (q = k = v = 0 and no weight in the output projection, as a
  narrower model inside a padded group), its delta as a matmul (a CPU's) and as a
  reduction: equal to autodiff's of the plain formula to the dtype's rounding; padded
  heads get exactly zero gradient."""
  monkeypatch.setattr(sums, "as_dots", lambda platform=None: dots)
  with jax.enable_x64(dtype == "float64"):
    dt = jnp.dtype(dtype)
    ks = jax.random.split(jax.random.key(5), 4)
    live = (jnp.arange(4) < 2)[None, None, :, None]  # heads 2, 3 padded
    q, k, v = (jnp.where(live, jax.random.normal(x, (3, 9, 4, 8)), 0).astype(dt)
               for x in ks[:3])
    w = jnp.where(live, jax.random.normal(ks[3], (3, 9, 4, 8)), 0).astype(  # o's zero rows
        jnp.promote_types(dt, jnp.float32))
    scale = jax.lax.rsqrt(jnp.asarray(6.0, jnp.promote_types(dt, jnp.float32)))
    def loss(fn):
      return lambda q, k, v: jnp.sum(jnp.sin(jax.vmap(lambda a, b, c: fn(a, b, c, scale))(
          q, k, v).astype(w.dtype)) * w)
    ours = lambda a, b, c, s: transformer.causal_attention(a, b, c, 1 / s ** 2, "einsum")
    got = jax.value_and_grad(loss(ours), argnums=(0, 1, 2))(q, k, v)
    want = jax.value_and_grad(loss(_autodiff_attention), argnums=(0, 1, 2))(q, k, v)
    rel = lambda a, b: float(jnp.max(jnp.abs(a.astype(jnp.float64 if dtype == "float64" else
                                                      jnp.float32) - b)) /
                             max(float(jnp.max(jnp.abs(b))), 1e-30))
    errs = [rel(got[0], want[0])] + [rel(g, r) for g, r in zip(got[1], want[1])]
    print(f"margin einsum attention backward ({dtype}): {max(errs):.1e} (< {tol:g})")
    assert max(errs) < tol, errs
    for g in got[1]:
      assert not np.any(np.asarray(g.astype(jnp.float32))[:, :, 2:])


def test_how_the_model_is_computed_is_not_a_workdirs_identity(tmp_path):
  """A workdir reruns with other attention, remat or unroll settings (the same function
  trained; the memory fit changes remat per group anyway), and one made before `auto`
  (remat "none" recorded) reruns under the new defaults; any other model field is still
  a different study."""
  import json as json_lib
  w = str(tmp_path / "w")
  smoke = "experiments/quickstart.py:smoke"
  study_lib.claim_workdir(study_lib.resolve(config.load(smoke)), w)
  for override in ("model.remat='block'", "model.attention='einsum'", "model.unroll='none'"):
    study_lib.claim_workdir(study_lib.resolve(config.load(smoke, [override])), w)
  saved = json_lib.load(open(tmp_path / "w" / "config.json"))
  saved["model"]["remat"] = "none"
  saved["model"].pop("unroll")  # as written before the field existed
  (tmp_path / "w" / "config.json").write_text(json_lib.dumps(saved))
  study_lib.claim_workdir(study_lib.resolve(config.load(smoke)), w)
  with pytest.raises(config.ConfigError, match=r"holds a different study \(model differ\)"):
    study_lib.claim_workdir(study_lib.resolve(config.load(smoke, ["model.mlp_ratio=2"])), w)
