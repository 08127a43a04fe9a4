#!/usr/bin/env bash
# Everything one lent GPU machine should run, as one command from the repo root, sized to
# fit one call of at most 10 minutes (BUILD_NOTES, "The third GPU check"):
#   tools/gpu/gpu_wheels.sh                 # here, once: the wheels the image lacks, in .whl/
#   tools/gpu/gpu_session.sh PART [OUT_DIR] # there: PART 1, 2, 3 or all; OUT_DIR: $OUT, else
#                                           # ./gpu_session
# On the machine it installs the carried wheels (.whl/: name it in the call's carry, an
# ignored folder travels only so) and records the GPU and the versions (env.txt). Part 1
# runs the GPU-only tests (pytest_gpu.txt) and gpu_check's paper, a5_depth and medium steps
# (about 400 s); part 2, called right after it on the same machine, first
# tools/gpu/determinism_probe.py (whether training repeats bit for bit without `run`'s
# deterministic-ops flag, with cuDNN attention: about 70 s, at most 150; determinism.json
# and .txt), then the paper shape's option ablation and the smoke study (about 140 s);
# part 3, if device time is left, the tiny pair (about 110 s; its target was met on
# 2026-11-27, 64f8b1a). Each later part merges the earlier parts' steps (one check work dir).
# `all` runs every gpu_check step in one go (about 10 minutes; no determinism probe).
# Each part runs tools/gpu/gpu_check.sh with python3 (the image's jax for CUDA) under
# GPU_CHECK_DEADLINE (default 480 s a part), writes gpu_check.json and gpu_check.log, and
# packs the check's logs and JSONs into gc.tgz (7 files: the device tool returns at most 8).
set -u
part=${1:-}
case "$part" in
  1) steps="devices_float32 devices_bfloat16 bench_paper torch_paper plan_a5 plan_a5_flops
            bench_medium torch_medium" ;;
  2) steps="ablation_paper plan plan_smoke_flops run" ;;
  3) steps="bench_tiny torch_tiny" ;;
  all) steps="" ;;
  *) echo "usage: tools/gpu/gpu_session.sh 1|2|3|all [OUT_DIR]"; exit 2 ;;
esac
out=$(realpath -m "${2:-${OUT:-gpu_session}}")
cd "$(dirname "$0")/../.."
mkdir -p "$out"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || { echo "gpu_session: the wheels in .whl/ did not install"; exit 1; }
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
# The repo on the path: `python3 tools/gpu/determinism_probe.py` (and its children) import
# depthscale, which the image does not hold (gpu_check.sh adds it for its own steps).
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 WANDB_MODE=${WANDB_MODE:-disabled}
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  python3 -c "import jax, flax, optax, chex, numpy; print('jax', jax.__version__, 'flax', \
flax.__version__, 'optax', optax.__version__, 'chex', chex.__version__, 'numpy', \
numpy.__version__, jax.devices())"
  python3 -c "import torch; print('torch', torch.__version__)"
  echo "cpus $(nproc)"
} >"$out/env.txt" 2>&1
# The tests that run only on a GPU (skipped on a CPU, where CI runs): cuDNN's attention
# against einsum.
work=/tmp/gpu_session_check
if [ "$part" = 1 ] || [ "$part" = all ]; then
  timeout 90 python3 -m pytest -q -rA -p no:cacheprovider tests/test_model_options.py \
    -k on_a_gpu >"$out/pytest_gpu.txt" 2>&1
  echo "pytest exit status $?" >>"$out/pytest_gpu.txt"
  rm -rf "$work"
fi
if [ "$part" = 2 ]; then  # can run drop its flag and keep cuDNN?
  timeout 150 python3 tools/gpu/determinism_probe.py --json "$out/determinism.json" \
    >"$out/determinism.txt" 2>&1
  echo "determinism probe exit status $?" >>"$out/determinism.txt"
fi
GPU_CHECK_STEPS=$steps PYTHON=python3 GPU_CHECK_WORK=$work \
  GPU_CHECK_DEADLINE=${GPU_CHECK_DEADLINE:-$([ "$part" = all ] && echo 600 || echo 480)} \
  tools/gpu/gpu_check.sh "$out/gpu_check.json" >"$out/gpu_check.log" 2>&1
status=$?
tar czf "$out/gc.tgz" --exclude=cache --exclude=paper-cache --exclude=checkpoints \
  -C "$(dirname "$work")" "$(basename "$work")"
cat "$out/env.txt"
[ -e "$out/pytest_gpu.txt" ] && tail -3 "$out/pytest_gpu.txt"
tail -30 "$out/gpu_check.log"
[ -e "$out/determinism.txt" ] && tail -4 "$out/determinism.txt"
if [ -s "$work/ablation_paper.json" ]; then  # the option ablation's table, as it printed it
  python3 -c "import json, sys; sys.path.insert(0, 'tools/gpu'); import option_ablation as o; \
print(o.table(json.load(open(sys.argv[1]))))" "$work/ablation_paper.json"
fi
exit $status
