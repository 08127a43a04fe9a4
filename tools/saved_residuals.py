"""What the backward pass keeps per layer, from JAX's own account (nothing runs): the
residuals of one model's loss at the paper's shape (width 512, 8 heads, one sequence of
128, bf16 compute), layer stack unrolled, no remat: the layer scan's, per layer.

  .venv/bin/python tools/saved_residuals.py [--attention einsum] [--list]

Issue 48's lead: a torch.compile step keeps about 12-15 B*T*D tensors a layer. Prints the
count in bf16 T*D units (a float32 T*D tensor is 2) and, with --list, each residual. The
layers' bf16 copies of their weights are counted apart: per model, not per sequence, so
they fade at batch 128.
"""
from __future__ import annotations

import argparse
import collections

import jax
import jax.numpy as jnp
from jax._src.ad_checkpoint import saved_residuals  # what print_saved_residuals prints

from depthscale.model import transformer as tr

T, D, H = 128, 512, 8


def residuals(depth: int, attention: str) -> list[tuple[jax.ShapeDtypeStruct, str]]:
  cfg = tr.ModelConfig(depth=depth, width=D, heads=H, max_len=T, output_dim=60, vocab=64,
                       compute_dtype="bfloat16", attention=attention, remat="none",
                       unroll="full")
  model, arch = tr.Transformer(cfg), tr.arch_for(cfg, depth, D, H)
  x = jnp.zeros((T,), jnp.int32)
  shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), x, arch))
  params = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
  loss = lambda p: jnp.sum(model.apply(p, x, arch).astype(jnp.float32))
  return [(aval, why) for aval, why in saved_residuals(loss, params)
          if "argument" not in why]  # the parameters themselves are kept anyway


def per_layer(attention: str, depth: int = 2) -> collections.Counter:
  """{(shape, dtype): count} each layer keeps: the layer scan's residuals, stacked over
  `depth` (the leading axis dropped); the embedding's, final norm's and head's are not."""
  return collections.Counter((aval.shape[1:], str(aval.dtype))
                             for aval, _ in residuals(depth, attention)
                             if aval.shape[:1] == (depth,))


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--attention", default="einsum", choices=("einsum", "dot_product"))
  ap.add_argument("--list", action="store_true")
  args = ap.parse_args()
  unit = T * D * 2  # bytes of one bf16 T*D tensor
  acts = weights = 0.0
  for (shape, dtype), n in sorted(per_layer(args.attention).items()):
    size = n * jnp.dtype(dtype).itemsize
    for d in shape:
      size *= d
    is_weight = T not in shape  # no sequence axis: a weight's bf16 copy
    weights, acts = (weights + size, acts) if is_weight else (weights, acts + size)
    if args.list:
      print(f"{n} x {dtype}{list(shape)}{'  (weight copy)' if is_weight else ''}")
  print(f"{args.attention}: per layer and sequence {acts / unit:.1f} bf16 T*D units of "
        f"activations, plus {weights / 2**20:.1f} MiB of bf16 weight copies per model")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
