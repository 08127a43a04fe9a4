#!/bin/bash
# Wall time of 4 groups of 3 models on 4 forced CPU devices: this checkout's device slots
# against the filler copies of an earlier commit (default 69edbfa, before slots), run in
# turn for 2 rounds. Usage: tools/slots_vs_filler.sh [BASE_COMMIT]   (BUILD_NOTES, issue 11)
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
base=${1:-69edbfa}
old=$(mktemp -d /tmp/slots-base.XXXXXX)
git -C "$repo" worktree add -q --detach "$old" "$base"
trap 'git -C "$repo" worktree remove --force "$old"' EXIT
export XLA_FLAGS=--xla_force_host_platform_device_count=4 WANDB_MODE=disabled
args=(--config experiments/quickstart.py:smoke --no-progress --config.plan.max_models_per_group=3
      --config.train.steps=600 "--config.grid.length=[8,16]")
for round in 1 2; do
  for which in slots base; do
    src=$repo; [ $which = base ] && src=$old
    work=$(mktemp -d /tmp/slots-run.XXXXXX)
    # the checkout's own package, not the editable install's
    (cd "$src" && s=$(date +%s.%N) && PYTHONPATH=$src "$repo/.venv/bin/python" -c "
import sys; sys.meta_path = [f for f in sys.meta_path if 'editable' not in repr(f)]
import depthscale; assert depthscale.__file__.startswith('$src'), depthscale.__file__
from depthscale.cli import main; sys.exit(main(sys.argv[1:]))" run "${args[@]}" --workdir "$work/w" 2>"$work/err" \
      && e=$(date +%s.%N) && python3 - "$which" "$round" "$s" "$e" "$work/w/results.csv" <<'PY'
import csv, sys
which, rnd, s, e, path = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
g = {r["group"]: float(r["train_s"]) for r in rows}
print(f"round {rnd} {which}: wall {float(e) - float(s):.1f} s, {len(g)} groups, sum of "
      f"train_s {sum(g.values()):.1f} s, devices per group {sorted({r.get('devices') or '4 (filler)' for r in rows})}")
PY
    )
  done
done
