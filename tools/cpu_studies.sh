#!/usr/bin/env bash
# Runs every study's :cpu variant (or those named) one after another into OUT/<name> and
# prints, per study, its wall time and claims.json (claim: holds, measured).
# Usage: tools/cpu_studies.sh OUT [spec ...]   e.g. tools/cpu_studies.sh runs/cpu
#        (specs default to all: retrieval_layers.py:ic,cpu ... looped_a5.py:cpu)
set -euo pipefail
out=${1:?usage: tools/cpu_studies.sh OUT [study.py:args ...]}; shift
specs=("$@")
if [ ${#specs[@]} -eq 0 ]; then
  specs=(retrieval_layers.py:ic,cpu retrieval_layers.py:nonic,cpu khop_depth.py:cpu
         a5_depth.py:cpu a5_width.py:cpu looped_a5.py:cpu reachability_depth.py:cycles,cpu)
fi
py=${PYTHON:-.venv/bin/python}
mkdir -p "$out"
for spec in "${specs[@]}"; do
  name=$(echo "${spec%.py*}_${spec#*:}" | tr ',' '_')
  start=$(date +%s)
  $py -m depthscale.cli run --config "experiments/$spec" --workdir "$out/$name" --no-progress \
    > "$out.$name.log" 2>&1 || { echo "$spec: failed (log: $out.$name.log)"; exit 1; }
  echo "== $spec: $(( $(date +%s) - start )) s wall -> $out/$name/report.md"
  $py - "$out/$name/claims.json" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1])):
  print(f"  [{'holds' if c['holds'] else 'NO'}] {c['claim']}: {c['measured']}")
PY
done
