#!/usr/bin/env bash
# The one command a session with a lent GPU (or TPU) runs; writes ONE JSON:
#   tools/gpu_check.sh [OUT.json]                  # default gpu_check.json
#   GPU_CHECK_QUICK=1 tools/gpu_check.sh OUT.json  # CPU-sized, no benches (its test,
#                                                   tests/test_gpu_check.py)
# Steps: `depthscale devices --json` (float32, bfloat16); bench tiny with 256 models (engine
# over one at a time; GPU target >= 50x); bench medium in bfloat16 (engine fraction of the
# bf16 peak; GPU target >= 30%); bench mixed if that preset exists; `plan --json` of the
# quickstart smoke study, then that study run, and the plan's estimate over the measured
# training time. A failed step keeps its error text and the others go on; the JSON then
# has "ok": false and the failed steps. Logs stay in $GPU_CHECK_WORK (default: a temp dir).
# PYTHON picks the interpreter (default .venv/bin/python, else python3 with the repo on
# PYTHONPATH, e.g. an image with jax for CUDA preinstalled).
set -u
out=$(realpath -m "${1:-gpu_check.json}")
work=$(realpath -m "${GPU_CHECK_WORK:-$(mktemp -d /tmp/gpu_check.XXXXXX)}")
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export WANDB_MODE=${WANDB_MODE:-disabled} PYTHONUNBUFFERED=1
mkdir -p "$work"
# A fresh probe cache: the plan measures its programs now, on this device, not reads an
# earlier session's figures.
export DEPTHSCALE_CACHE=${DEPTHSCALE_CACHE:-$work/cache}
quick=${GPU_CHECK_QUICK:-0}
step_timeout=${GPU_CHECK_STEP_TIMEOUT:-1800}

if [ "$quick" = 1 ]; then
  # The run reuses the program the plan compiled (on a GPU each compiles its own: the
  # compile times are part of what the check reports).
  export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-$work/jax-cache}
  export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=${JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS:-0}
  study=(--config.train.steps=40 --config.train.steps_per_call=20 --config.checkpoint_every=20)
else
  tiny_models=256
  study=()
fi

# step NAME CMD...: runs `python -m depthscale.cli CMD...`; stdout, stderr, status and
# start and end times go to $work/NAME.{out,err,rc,s}.
step() {
  local name=$1; shift
  echo "gpu_check: $name: depthscale $*" >&2
  printf '%s\n' "$@" >"$work/$name.cmd"
  local t0=$EPOCHREALTIME
  timeout "$step_timeout" "$PYTHON" -m depthscale.cli "$@" >"$work/$name.out" 2>"$work/$name.err"
  echo $? >"$work/$name.rc"
  echo "$t0 $EPOCHREALTIME" >"$work/$name.s"
}
# skip NAME WHY: a step not run, and why (absent / quick mode).
skip() { echo "$2" >"$work/$1.skipped"; echo "gpu_check: $1: $2" >&2; }

step devices_float32 devices --json --dtype float32
step devices_bfloat16 devices --json --dtype bfloat16
if [ "$quick" = 1 ]; then
  # the benches take minutes on a CPU; their JSON's merge is tested on a made-up one
  skip bench_tiny "skipped: quick mode (minutes on a CPU)"
  skip bench_medium "skipped: quick mode (minutes on a CPU)"
else
  step bench_tiny bench --preset tiny --models "$tiny_models" --json "$work/bench_tiny.json"
  step bench_medium bench --preset medium --dtype bfloat16 --json "$work/bench_medium.json"
fi
if ! "$PYTHON" -m depthscale.cli bench --help 2>/dev/null | grep -Eq -- '--preset \{[^}]*\bmixed\b'; then
  skip bench_mixed absent
elif [ "$quick" = 1 ]; then
  skip bench_mixed "skipped: quick mode (minutes on a CPU)"
else
  step bench_mixed bench --preset mixed --json "$work/bench_mixed.json"
fi
step plan plan --config experiments/quickstart.py:smoke --no-progress "${study[@]}" \
  --json "$work/plan.json"
rm -rf "$work/smoke"
step run run --config experiments/quickstart.py:smoke --no-progress "${study[@]}" \
  --workdir "$work/smoke"

"$PYTHON" tools/gpu_check.py "$work" "$out" --quick "$quick"
