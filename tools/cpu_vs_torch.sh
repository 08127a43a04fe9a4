#!/usr/bin/env bash
# The engine against PyTorch on this CPU, in one run: `depthscale bench --preset P` then
# tools/torch_baseline.py at the same preset (eager, torch.compile, torch.func), one after
# the other, nothing else running; then tools/versus_torch.py's ratios into one JSON.
#   TORCH_PYTHON=~/.torchvenv/bin/python tools/cpu_vs_torch.sh [OUT.json] [PRESET]
# PyTorch is not a dependency of the project: give it a venv of its own (../shared/SPEED.md).
set -euo pipefail
out=$(realpath -m "${1:-cpu_vs_torch.json}")
preset=${2:-small}
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
TORCH_PYTHON=${TORCH_PYTHON:-$HOME/.torchvenv/bin/python}
work=$(mktemp -d /tmp/cpu_vs_torch.XXXXXX)
"$PYTHON" -m depthscale.cli bench --preset "$preset" --json "$work/bench.json" | tail -1
"$TORCH_PYTHON" tools/torch_baseline.py --preset "$preset" --models 16 --steps 50 \
  --repeats 3 --json "$work/torch.json" | tail -3
"$PYTHON" tools/versus_torch.py "$work/bench.json" "$work/torch.json" >"$out"
"$PYTHON" - "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"engine / best torch ({r['best_torch']}): {r['engine_over_best_torch']:.2f}; "
      f"one-model step / torch eager: {r['sequential_over_eager']:.2f}; wrote {sys.argv[1]}")
PY
