#!/usr/bin/env bash
# The same sweep (quickstart smoke: 6 models, 300 steps, one padded group) on 1, 2, 4 and
# 8 forced host devices; prints the group's training seconds (compile included) per count.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-/tmp/device_scaling}
rm -rf "$out"
for n in 1 2 4 8; do
  XLA_FLAGS=--xla_force_host_platform_device_count=$n WANDB_MODE=disabled \
    .venv/bin/python -m depthscale.cli run --config experiments/quickstart.py:smoke \
    --workdir "$out/$n" --no-progress 2>/dev/null
  s=$(.venv/bin/python -c "import csv; r=list(csv.DictReader(open('$out/$n/results.csv'))); print(r[0]['compile_s'], r[0]['train_s'])")
  echo "devices=$n compile_s,train_s= $s"
done
