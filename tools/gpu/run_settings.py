"""The settings `depthscale run` trains under on this device (and `bench`, `plan` and
tools/gpu/option_ablation.py, which call the same sweep/study.reproducible_xla before JAX
starts), as one JSON object: issue 60 asks for them beside every speed figure.

  python tools/gpu/run_settings.py [--dtype bfloat16] [--head-dim 64] [--depth 12] [--json F]

XLA_FLAGS (with run's deterministic ops), the float32 matmul precision, the PRNG, and the
model options a study that says nothing gets (`auto`), resolved as the engine resolves
them at trace time for the paper's A5 shape (width 512, 8 heads: head size 64, depth 12,
bfloat16) by default. gpu_check.sh's `settings` step; gpu_check.py prints them.
"""
from __future__ import annotations

import argparse
import json
import os
import sys


def settings(dtype: str = "bfloat16", head_dim: int = 64, depth: int = 12) -> dict:
  from depthscale.sweep.study import reproducible_xla
  reproducible_xla()  # before JAX starts its backends, as `run` does
  import jax
  import jaxlib
  from depthscale.model import transformer
  from depthscale.model.attention import attention_impl, deterministic_gpu_ops
  defaults = transformer.ModelConfig.__dataclass_fields__
  remat = transformer.remat_policy("auto")
  dev = jax.devices()[0]
  return {
      "xla_flags": os.environ.get("XLA_FLAGS", ""),
      "deterministic_gpu_ops": deterministic_gpu_ops(),
      "matmul_precision": str(jax.config.jax_default_matmul_precision),
      "threefry_partitionable": bool(jax.config.jax_threefry_partitionable),
      "options": {
          "attention": {"option": defaults["attention"].default,
                        "resolved": attention_impl(defaults["attention"].default, dtype,
                                                   head_dim)},
          "remat": {"option": defaults["remat"].default, "resolved": remat},
          "unroll": {"option": defaults["unroll"].default, "resolved": (
              "full" if transformer.unroll_layers(defaults["unroll"].default, depth,
                                                  defaults["remat"].default) else "none")},
          "gelu": {"option": defaults["gelu"].default, "resolved": defaults["gelu"].default}},
      "shape": {"dtype": dtype, "head_dim": head_dim, "depth": depth},
      "device": {"kind": dev.device_kind, "platform": dev.platform,
                 "count": jax.device_count()},
      "versions": {"jax": jax.__version__, "jaxlib": jaxlib.__version__},
  }


def tag(s: dict) -> str:
  """One short line for beside a figure."""
  o = s["options"]
  flags = "deterministic ops" if s["deterministic_gpu_ops"] else "NO deterministic ops"
  return (f"run's settings: {flags}, f32 matmuls {s['matmul_precision']}, attention "
          f"{o['attention']['option']}->{o['attention']['resolved']}, remat "
          f"{o['remat']['option']}->{o['remat']['resolved']}, gelu {o['gelu']['resolved']}")


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16"))
  ap.add_argument("--head-dim", type=int, default=64)
  ap.add_argument("--depth", type=int, default=12)
  ap.add_argument("--json", help="where to write it (also printed)")
  args = ap.parse_args(argv)
  s = settings(args.dtype, args.head_dim, args.depth)
  text = json.dumps(s, indent=1)
  if args.json:
    with open(args.json, "w") as f:
      f.write(text + "\n")
  print(text)
  print(tag(s), file=sys.stderr)
  return 0


if __name__ == "__main__":
  sys.exit(main())
