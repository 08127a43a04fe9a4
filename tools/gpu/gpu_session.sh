#!/usr/bin/env bash
# Everything one lent GPU machine should run for issue 60, part by part in the issue's
# order, each part one call of at most 10 minutes (BUILD_NOTES, "The third GPU check"):
#   tools/gpu/gpu_wheels.sh                 # here, once: the wheels the image lacks, in .whl/
#   tools/gpu/gpu_session.sh PART [OUT_DIR] # there: PART 1, 2, 3, 4 or all; OUT_DIR: $OUT,
#                                           # else ./gpu_session
# On the machine it installs the carried wheels (.whl/: name it in the call's carry, an
# ignored folder travels only so) and records the GPU and the versions (env.txt). Every
# engine figure is taken under `run`'s settings (its XLA flags with deterministic ops,
# float32 matmuls at highest, attention=auto and remat=auto as resolved there), which the
# `settings` step records and the summary prints beside each figure.
#   1  item 1: settings, the paper shape (`bench --preset paper`) and torch eager/compile
#      in the same call, the A5 smoke study run to the end and killed once and rerun, bit
#      for bit (about 300 s, at most 480)
#   2  item 2, then item 4: tools/gpu/determinism_probe.py (can `run` keep cuDNN; about 70 s,
#      at most 150), the gelu=recompute A/B at the paper shape (5 rounds; at most 150), then
#      the GPU-only tests (cuDNN attention against einsum) if 100 s are left (about 250 s)
#   3  item 3: medium x64 bf16 and tiny x256 against torch.func, a5_depth's plan probed at
#      depths 6, 12, 24 in GPU-hours, the matmul peaks (about 350 s, at most 480)
#   4  item 5: reachability_depth.py's plan probed, then the lengths it says fit the time
#      left run to the end (tools/gpu/science_run.py), then the quickstart smoke plan/run
# Parts 2-4 are called on the same warm machine after 1 (one check work dir; each later
# part merges the earlier parts' steps). `all` runs every gpu_check step in one go, cut by
# the deadline. Each part runs tools/gpu/gpu_check.sh with python3 (the image's jax for
# CUDA) within GPU_SESSION_BUDGET seconds of its start (default 510: a 600 s call with
# margin), writes gpu_check.json and gpu_check.log, and packs the check's logs and JSONs
# into gc.tgz (at most 6 files in $OUT: the device tool returns at most 8).
set -u
part=${1:-}
case "$part" in
  1) steps="settings bench_paper torch_paper a5_kill_rerun" ;;
  2) steps="settings determinism gelu_paper" ;;
  3) steps="settings bench_medium torch_medium bench_tiny torch_tiny plan_a5 plan_a5_flops
            devices_float32 devices_bfloat16" ;;
  4) steps="settings reach_plan reach_run plan plan_smoke_flops run" ;;
  all) steps="" ;;
  *) echo "usage: tools/gpu/gpu_session.sh 1|2|3|4|all [OUT_DIR]"; exit 2 ;;
esac
steps=$(echo $steps)  # one line: gpu_check.sh matches " NAME "
budget=${GPU_SESSION_BUDGET:-510}  # seconds from here to the summary
py=${PYTHON:-python3}  # the image's python with jax for CUDA (tests/test_gpu_check.py: the venv's)
out=$(realpath -m "${2:-${OUT:-gpu_session}}")
cd "$(dirname "$0")/../.."
mkdir -p "$out"
if [ "${GPU_CHECK_QUICK:-0}" != 1 ] && compgen -G ".whl/*.whl" >/dev/null; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || { echo "gpu_session: the wheels in .whl/ did not install"; exit 1; }
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
# The repo on the path: the pytest step and gpu_check.sh's tools import depthscale, which
# the image does not hold.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 WANDB_MODE=${WANDB_MODE:-disabled}
# The GPU and the versions; in quick mode (a CPU, its test) parts 2-4 keep the env.txt part 1
# wrote in the same OUT_DIR.
if [ "${GPU_CHECK_QUICK:-0}" != 1 ] || [ "$part" = 1 ] || [ ! -s "$out/env.txt" ]; then {
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  "$py" -c "import jax, flax, optax, chex, numpy; print('jax', jax.__version__, 'flax', \
flax.__version__, 'optax', optax.__version__, 'chex', chex.__version__, 'numpy', \
numpy.__version__, jax.devices())"
  "$py" -c "import torch; print('torch', torch.__version__)"
  echo "cpus $(nproc)"
} >"$out/env.txt" 2>&1
fi
work=${GPU_SESSION_WORK:-/tmp/gpu_session_check}
[ "$part" = 1 ] || [ "$part" = all ] && rm -rf "$work"  # part 1 starts a fresh check
# In quick mode (a CPU, its test) parts 2-4 keep the settings an earlier part recorded in
# the same work dir: the same machine, nothing to measure again.
if [ "${GPU_CHECK_QUICK:-0}" = 1 ] && [ "$(cat "$work/settings.rc" 2>/dev/null)" = 0 ]; then
  steps=$(echo " $steps " | sed 's/ settings / /')
  steps=$(echo $steps)
fi
# the check's deadline: the part's budget less what came before, less 100 s in part 2 for
# the GPU-only tests after it
reserve=$([ "$part" = 2 ] && [ "${GPU_CHECK_QUICK:-0}" != 1 ] && echo 100 || echo 0)
GPU_CHECK_STEPS=$steps PYTHON=$py GPU_CHECK_WORK=$work \
  GPU_CHECK_DEADLINE=${GPU_CHECK_DEADLINE:-$((budget - SECONDS - reserve))} \
  tools/gpu/gpu_check.sh "$out/gpu_check.json" >"$out/gpu_check.log" 2>&1
status=$?
# The tests that run only on a GPU (skipped on a CPU, where CI runs): cuDNN's attention
# against einsum; in part 2 (cuDNN's question) if the time is left.
left=$((budget - SECONDS - 10))
if { [ "$part" = 2 ] || [ "$part" = all ]; } && [ "$left" -ge 60 ] \
    && [ "${GPU_CHECK_QUICK:-0}" != 1 ]; then
  timeout -k 10 $((left < 90 ? left : 90)) "$py" -m pytest -q -rA \
    -p no:cacheprovider tests/test_model_options.py -k on_a_gpu >"$out/pytest_gpu.txt" 2>&1
  echo "pytest exit status $?" >>"$out/pytest_gpu.txt"
fi
tar czf "$out/gc.tgz" --exclude=cache --exclude=paper-cache --exclude=checkpoints \
  -C "$(dirname "$work")" "$(basename "$work")"
cat "$out/env.txt"
[ -e "$out/pytest_gpu.txt" ] && tail -3 "$out/pytest_gpu.txt"
tail -30 "$out/gpu_check.log"
for name in gelu_paper ablation_paper; do  # the option ablations' tables, as they printed them
  if [ -s "$work/$name.json" ] && [[ " $steps " == *" $name "* || -z "$steps" ]]; then
    "$py" -c "import json, sys; sys.path.insert(0, 'tools/gpu'); \
import option_ablation as o; print(o.table(json.load(open(sys.argv[1]))))" "$work/$name.json"
  fi
done
exit $status
