"""Depth-compacted forward pass of a group whose models differ in depth (or repeats).

The group's models are ordered deepest first, so layer t (of repeat r) runs on a static
leading slice [:m] of the models axis while the rest pass through unchanged. Layers
with the same m form a band, one lax.scan (or unrolled when shallow); a cap on the
number of bands merges neighbours (a few masked layers) to bound compile time.
Embedding, Block and head are transformer.py's, applied per model; only the layer stack
sees the models axis. Never imports core/, sweep/ or tasks/.
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from depthscale.model import transformer
from depthscale.model.transformer import Arch, Block, LayerNorm, ModelConfig

MAX_BANDS = 4  # layer bands per stack (and repeat bands per looped stack); see BUILD_NOTES
UNROLL_DEPTH = 8  # unroll=auto on a CPU: stacks up to this deep are unrolled (scanned bands:
                  # slower on CPU); every stack on an accelerator (transformer.unroll_layers)


def order(shapes, lanes: int) -> list[int]:
  """Program order of models with `shapes` [(depth, repeats)]: sorted deepest first
  (repeats, then depth; stable), then dealt round-robin into `lanes` contiguous blocks
  (the devices), so every block has the same depth profile as far as possible."""
  ranked = sorted(range(len(shapes)), key=lambda i: (-shapes[i][1], -shapes[i][0]))
  return [i for lane in range(lanes) for i in ranked[lane::lanes]]


def profile(shapes, lanes: int) -> tuple[tuple[int, ...], ...]:
  """counts[r][t]: how many leading models of a lane run layer t of repeat r, the lanes
  being ranked[l::lanes] (a device's block, or a chunk of it); the most over lanes, so
  one program serves them all (a model in the slice without that layer is masked)."""
  ranked = sorted(shapes, key=lambda s: (-s[1], -s[0]))
  depth, repeats = max(s[0] for s in shapes), max(s[1] for s in shapes)
  def need(lane, r, t):
    hit = [i for i, (d, n) in enumerate(lane) if n > r and d > t]
    return hit[-1] + 1 if hit else 0
  lanes_ = [ranked[l::lanes] for l in range(lanes)]
  return tuple(tuple(max(need(lane, r, t) for lane in lanes_) for t in range(depth))
               for r in range(repeats))


def bands(costs, max_bands: int = MAX_BANDS) -> list[tuple[int, int]]:
  """Split items 0..n-1 (non-increasing `costs`: a band costs its length x its first
  item's cost) into at most `max_bands` consecutive bands of least total cost; runs of
  equal cost are never split."""
  n = len(costs)
  cuts = [i for i in range(1, n) if costs[i] != costs[i - 1]]
  starts = [0] + cuts
  ends = cuts + [n]
  k = len(starts)
  inf = float("inf")
  # best[b][j]: least cost of the first j runs in b bands
  best = [[inf] * (k + 1) for _ in range(max_bands + 1)]
  back = [[0] * (k + 1) for _ in range(max_bands + 1)]
  best[0][0] = 0.0
  for b in range(1, max_bands + 1):
    for j in range(1, k + 1):
      for i in range(j):
        c = best[b - 1][i] + (ends[j - 1] - starts[i]) * costs[starts[i]]
        if c < best[b][j]:
          best[b][j], back[b][j] = c, i
  b = min(range(1, max_bands + 1), key=lambda b: (best[b][k], b))
  out, j = [], k
  while j:
    i = back[b][j]
    out.append((starts[i], ends[j - 1]))
    j, b = i, b - 1
  return out[::-1]


def computed_layers(counts) -> int:
  """Model-layers the compacted stack computes (masked ones included) for `counts`."""
  if len(counts) == 1:
    return sum((b - a) * counts[0][a] for a, b in bands(counts[0]))
  per_repeat = [computed_layers((row,)) for row in counts]
  return sum((b - a) * per_repeat[a] for a, b in bands(per_repeat))


def _layer(cfg: ModelConfig):
  """One layer of m models: (params [m, ...], x [m, B, T, D], on [m], arch [m]) -> x."""
  block = Block(cfg)

  def one(p, x_BxTxD, on, arch):
    return jax.vmap(lambda x: block.apply({"params": p}, x, on, arch))(x_BxTxD)
  f = jax.vmap(one)
  return jax.checkpoint(f) if transformer.remat_policy(cfg.remat) == "block" else f


def _split(tree, cuts, axis=1):
  """Every leaf split at `cuts` along `axis`: a list of trees (transposes to one concat)."""
  parts = jax.tree.map(lambda w: tuple(jnp.split(w, cuts, axis=axis)), tree)
  is_part = lambda x: isinstance(x, tuple)
  return [jax.tree.map(lambda p: p[i], parts, is_leaf=is_part) for i in range(len(cuts) + 1)]


def _take(tree, m):
  return jax.tree.map(lambda x: x[:m], tree)


def _layers(cfg, f, layer_M, x_MxBxTxD, on_MxL, arch_M: Arch, counts_L):
  """The layer stack on the n models of x: layer t on the leading counts_L[t] only."""
  n = x_MxBxTxD.shape[0]
  if counts_L[0] != n:
    raise ValueError(f"compact profile {counts_L} does not fit {n} models")
  # layers past the profile (no model here has them: a group's padded depth can exceed
  # its program's, e.g. after a rebuild) are never run
  if len(counts_L) < on_MxL.shape[1]:
    layer_M = jax.tree.map(lambda w: w[:, :len(counts_L)], layer_M)
    on_MxL = on_MxL[:, :len(counts_L)]
  spans = bands(counts_L)
  cuts = [a for a, _ in spans[1:]]
  params, ons = _split(layer_M, cuts), _split(on_MxL, cuts)
  unroll = transformer.unroll_layers(cfg.unroll, cfg.depth, cfg.remat, UNROLL_DEPTH)
  x, done = x_MxBxTxD, []
  for (a, b), p, on in zip(spans, params, ons):
    m = counts_L[a]
    if m < x.shape[0]:  # the models past m have no more layers: set aside unchanged
      done.append(x[m:])
      x = x[:m]
    p, on, arch = _take(p, m), on[:m], _take(arch_M, m)
    if unroll or b - a == 1:
      for p_l, on_l in zip(_split(p, list(range(1, b - a))), jnp.split(on, b - a, axis=1)):
        x = f(jax.tree.map(lambda w: w[:, 0], p_l), x, on_l[:, 0], arch)
    else:
      def body(x, layer):
        p_l, on_l = layer
        return f(p_l, x, on_l, arch), None
      x, _ = jax.lax.scan(body, x, (jax.tree.map(lambda w: jnp.moveaxis(w, 1, 0), p), on.T))
  return jnp.concatenate([x] + done[::-1]) if done else x


def _looped(cfg, f, layer_M, x_MxBxTxD, arch_M: Arch, counts):
  """The block applied repeat by repeat, repeat r on the leading counts[r][0] models."""
  per_repeat = [sum(row) for row in counts]
  x, done = x_MxBxTxD, []
  for a, b in bands(per_repeat):
    row = counts[a]
    n = row[0]
    if n < x.shape[0]:
      done.append(x[n:])
      x = x[:n]
    p, on_L, arch = _take(layer_M, n), arch_M.layer_mask_L[:n], _take(arch_M, n)

    def one_repeat(x, on_r):  # as transformer.Transformer's loop body
      y = _layers(cfg, f, p, x, on_L, arch, row)
      return x + on_r.astype(x.dtype)[:, None, None, None] * (y - x)
    if b - a == 1:
      x = one_repeat(x, arch.repeat_mask_R[:, a])
    else:
      x, _ = jax.lax.scan(lambda x, on_r: (one_repeat(x, on_r), None), x,
                          arch.repeat_mask_R[:, a:b].T)
  return jnp.concatenate([x] + done[::-1]) if done else x


def _embed(cfg: ModelConfig, params, inputs):
  """One model, one sequence: as transformer.Transformer before its stack."""
  init = nn.initializers.normal(0.02)
  dt = dict(dtype=cfg.compute_dtype or cfg.dtype, param_dtype=cfg.dtype)
  if cfg.vocab is not None:
    mod = nn.Embed(cfg.vocab, cfg.width, embedding_init=init, **dt)
  else:
    mod = nn.Dense(cfg.width, kernel_init=init, **dt)
  x_TxD = mod.apply({"params": params["embed"]}, inputs)
  if cfg.pos == "learned":
    x_TxD = x_TxD + params["pos"][:x_TxD.shape[0]].astype(x_TxD.dtype)
  return x_TxD


def _head(cfg: ModelConfig, params, x_TxD, arch: Arch):
  """One model, one sequence: as transformer.Transformer after its stack."""
  x_TxD = LayerNorm(cfg.dtype).apply({"params": params["ln_f"]}, x_TxD.astype(cfg.dtype),
                                     arch.width_mask_D)
  head = nn.Dense(cfg.output_dim, dtype=cfg.dtype, param_dtype=cfg.dtype)
  return head.apply({"params": params["head"]}, x_TxD)


def forward(cfg: ModelConfig, counts, params_M, inputs_MxB, arch_M: Arch):
  """Outputs [M, B, T, output_dim] of the M models (in program order, see `order`) on
  their own batches; `counts` from `profile`. Equal to vmapping Transformer.apply."""
  x_MxBxTxD = jax.vmap(lambda p, xs: jax.vmap(lambda x: _embed(cfg, p, x))(xs))(
      params_M, inputs_MxB)
  layer_M, f = params_M["stack"]["layer"], _layer(cfg)
  if cfg.repeats == 1:
    x_MxBxTxD = _layers(cfg, f, layer_M, x_MxBxTxD, arch_M.layer_mask_L, arch_M, counts[0])
  else:
    x_MxBxTxD = _looped(cfg, f, layer_M, x_MxBxTxD, arch_M, counts)
  return jax.vmap(lambda p, xs, a: jax.vmap(lambda x: _head(cfg, p, x, a))(xs))(
      params_M, x_MxBxTxD, arch_M)
