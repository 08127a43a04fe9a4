#!/usr/bin/env bash
# The engine against PyTorch on this CPU, in one run: ROUNDS rounds (default 3), each
# `depthscale bench --preset P` and tools/torch_baseline.py at the same preset (eager,
# torch.compile, torch.func), the two in turn (which goes first alternates by round, so a
# drift in the machine's speed favours neither), nothing else running. Each round's ratios
# come from tools/gpu/versus_torch.py; the JSON holds every round and the median of each ratio.
#   TORCH_PYTHON=~/.torchvenv/bin/python tools/bench/cpu_vs_torch.sh [OUT.json] [PRESET] [ROUNDS]
# PyTorch is not a dependency of the project: give it a venv of its own (../shared/SPEED.md).
# On a machine whose speed drifts between the two sides' runs, tools/bench/torch_paired.py times
# them turn by turn instead (the figure BUILD_NOTES quotes for issue 48 item 4).
set -euo pipefail
out=$(realpath -m "${1:-cpu_vs_torch.json}")
preset=${2:-small}
rounds=${3:-3}
(( rounds >= 1 )) || { echo "cpu_vs_torch.sh: ROUNDS must be 1 or more, not $rounds" >&2; exit 2; }
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-.venv/bin/python}
TORCH_PYTHON=${TORCH_PYTHON:-$HOME/.torchvenv/bin/python}
work=$(mktemp -d /tmp/cpu_vs_torch.XXXXXX)
engine() { "$PYTHON" -m depthscale.cli bench --preset "$preset" --json "$work/bench$1.json" | tail -1; }
torch() {
  "$TORCH_PYTHON" tools/torch_baseline.py --preset "$preset" --models 16 --steps 50 \
    --repeats 3 --json "$work/torch$1.json" | tail -3
}
for r in $(seq 1 "$rounds"); do
  if (( r % 2 )); then engine "$r"; torch "$r"; else torch "$r"; engine "$r"; fi
  "$PYTHON" tools/gpu/versus_torch.py "$work/bench$r.json" "$work/torch$r.json" >"$work/ratio$r.json"
done
"$PYTHON" - "$out" "$work" "$rounds" <<'PY'
import json, statistics, sys
out, work, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
each = [json.load(open(f"{work}/ratio{r}.json")) for r in range(1, rounds + 1)]
keys = ("engine_over_best_torch", "sequential_over_eager", "engine_model_steps_per_s",
        "sequential_model_steps_per_s")
f = lambda x: "n/a" if x is None else f"{x:.2f}"
med = {k: statistics.median(v) if (v := [e[k] for e in each if e[k] is not None]) else None
       for k in keys}
json.dump({"median": med, "rounds": each}, open(out, "w"), indent=2)
for r, e in enumerate(each, 1):
  print(f"round {r}: engine {e['engine_model_steps_per_s']:.1f}, torch "
        + ", ".join(f"{v} {x:.1f}" for v, x in e["torch_model_steps_per_s"].items())
        + f"; engine / best torch ({e['best_torch']}) {f(e['engine_over_best_torch'])}, "
        f"one-model / eager {f(e['sequential_over_eager'])}")
print(f"median of {rounds} rounds: engine / best torch {f(med['engine_over_best_torch'])}; "
      f"one-model step / torch eager {f(med['sequential_over_eager'])}; wrote {out}")
PY
