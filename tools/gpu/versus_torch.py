"""The engine against PyTorch, from the two programs' own JSON: `depthscale bench --json` and
tools/torch_baseline.py --json (the same model in PyTorch), measured one after the other on
one machine. Model-steps per second only (the two count FLOPs differently).

  python tools/gpu/versus_torch.py BENCH.json TORCH.json  prints the ratios as JSON

- engine_over_best_torch: the engine's rate over the best PyTorch variant (eager,
  torch.compile, reduce-overhead, torch.func vmap), whichever that was;
- sequential_over_eager: the engine's one-model-at-a-time loop over torch eager's, the
  same one-model step against the plain loop.
Imports nothing from depthscale (gpu_check.py uses it on whatever the GPU image holds).
"""
from __future__ import annotations

import json
import sys

VARIANTS = ("eager", "compile", "compile_ro", "func_vmap")


def ratios(bench: dict, torch: dict) -> dict:
  rates = {v: r["model_steps_per_s"] for v, r in torch["variants"].items()
           if v in VARIANTS and r}
  if not rates:
    raise ValueError(f"no PyTorch variant ran ({torch.get('notes')})")
  best = max(rates, key=rates.get)
  engine = bench["engine"]["model_steps_per_s"]
  sequential = bench["sequential"]["model_steps_per_s"]
  out = {"engine_model_steps_per_s": engine, "sequential_model_steps_per_s": sequential,
         "torch_model_steps_per_s": rates, "best_torch": best,
         "engine_over_best_torch": engine / rates[best],
         "sequential_over_eager": sequential / rates["eager"] if "eager" in rates else None,
         "engine_models": bench["preset"]["models"], "torch_models": torch["config"]["models"],
         "dtype": {"engine": bench["dtype"]["compute"], "torch": torch["dtype"]},
         "device": {"engine": bench["device"]["kind"],
                    "torch": torch.get("gpu") or torch.get("machine")}}
  return out


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  if len(argv) != 2:
    sys.exit("usage: python tools/gpu/versus_torch.py BENCH.json TORCH.json")
  with open(argv[0]) as f, open(argv[1]) as g:
    print(json.dumps(ratios(json.load(f), json.load(g)), indent=2))
  return 0


if __name__ == "__main__":
  sys.exit(main())
