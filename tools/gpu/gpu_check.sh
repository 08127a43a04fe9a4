#!/usr/bin/env bash
# The one command to run on a lent GPU (or TPU) machine; writes ONE JSON:
#   tools/gpu/gpu_check.sh [OUT.json]                  # default gpu_check.json
#   GPU_CHECK_QUICK=1 tools/gpu/gpu_check.sh OUT.json  # CPU-sized, no benches (its test,
#                                                      tests/test_gpu_check.py)
# Each engine bench is followed by tools/torch_baseline.py (the same model in PyTorch) at the
# same shape, and the JSON holds each engine / best-torch ratio (tools/gpu/versus_torch.py).
# Steps, in issue 60's order, each with its own time limit in seconds (the whole check
# ends within GPU_CHECK_DEADLINE, default 660 = 11 min, start-up aside: a step that would
# start past it is skipped and says so; a step's limit is cut to the time left):
#   settings                            30        what `run` trains under here: XLA_FLAGS,
#                                                 precision, attention/remat auto resolved
#                                                 (tools/gpu/run_settings.py); `bench` and
#                                                 option_ablation.py apply the same
#   bench_paper, torch_paper            150, 100  the paper's A5 shape, depth 12, bf16,
#                                                 against torch eager and torch.compile
#   a5_kill_rerun                       200       the A5 smoke study run to the end, and
#                                                 killed once (SIGKILL) and rerun: bit for
#                                                 bit (tools/gpu/kill_rerun.py)
#   determinism                         150       can `run` keep cuDNN: repeats under each
#                                                 flag set (tools/gpu/determinism_probe.py)
#   gelu_paper                          150       model.gelu=recompute against the defaults
#                                                 at the paper shape, 5 rounds, run's settings
#   bench_medium, torch_medium          60, 60    medium x64, bf16
#   bench_tiny, torch_tiny              70, 60    tiny x256, float32
#   plan_a5                             180       a5_depth probed at depths 6, 12, 24 (the
#                                                 sweep's s/step, linear in depth, summed
#                                                 over 6..24 by gpu_check.py), beside
#   plan_a5_flops                       20        `plan --device h100` of the same study
#   devices_float32, devices_bfloat16   30 each   the matmul peaks
#   reach_plan, reach_run               180, 420  reachability_depth.py probed, then the
#                                                 lengths that fit the time left run to the
#                                                 end (tools/gpu/science_run.py)
#   ablation_paper                      120       the paper shape's model options against
#                                                 the defaults, under `run`'s settings: remat
#                                                 block, and cuDNN attention (which failed
#                                                 under deterministic ops on an H200)
#                                                 (tools/gpu/option_ablation.py)
#   bench_mixed                         (only with GPU_CHECK_MIXED=1) 120
#   plan, run                           45 each   the quickstart smoke study, planned then run
#   plan_smoke_flops                    20        `plan --device h100` of it
# In quick mode (a CPU) the benches, plan_a5 and ablation_paper are skipped; settings,
# a5_kill_rerun (depths 1-2, 20 steps, killed after its checkpoint at 10), determinism (2
# steps, float32), gelu_paper (bench's CPU size, depth 2, float32, 1 round), reach_* and
# plan/run (the :smoke studies at 20 steps) run at CPU sizes.
# GPU_CHECK_STEP_TIMEOUT caps every step's limit. GPU_CHECK_STEPS="NAME ..." runs those steps
# only, keeping what an earlier run left in the same GPU_CHECK_WORK (a check in two calls). A failed step keeps its error text and the
# others go on; the JSON then has "ok": false and the failed steps. Logs stay in
# $GPU_CHECK_WORK (default: a temp dir). PYTHON picks the interpreter (default
# .venv/bin/python, else python3 with the repo on PYTHONPATH, e.g. an image with jax for
# CUDA preinstalled); TORCH_PYTHON the one with torch (default: $PYTHON).
set -u
out=$(realpath -m "${1:-gpu_check.json}")
work=$(realpath -m "${GPU_CHECK_WORK:-$(mktemp -d /tmp/gpu_check.XXXXXX)}")
cd "$(dirname "$0")/../.."
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
TORCH_PYTHON=${TORCH_PYTHON:-$PYTHON}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export WANDB_MODE=${WANDB_MODE:-disabled} PYTHONUNBUFFERED=1
mkdir -p "$work"
# A fresh probe cache: the plan measures its programs now, on this device, not reads an
# earlier check's figures.
export DEPTHSCALE_CACHE=${DEPTHSCALE_CACHE:-$work/cache}
quick=${GPU_CHECK_QUICK:-0}
cap=${GPU_CHECK_STEP_TIMEOUT:-100000}
# names of the steps to run (default: all; tools/gpu/gpu_session.sh), any whitespace between
only=$(echo ${GPU_CHECK_STEPS:-})
deadline=$((SECONDS + ${GPU_CHECK_DEADLINE:-660}))

if [ "$quick" = 1 ]; then
  # The run reuses the program the plan compiled (on a GPU each compiles its own: the
  # compile times are part of what the check reports).
  export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-$work/jax-cache}
  export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=${JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS:-0}
  # The studies at 20 steps, 2 dispatches of 10, unsaved (the smoke default is every 60
  # steps); the A5 study killed and rerun at depths 1 and 2 (2 seeds: a padded group of 4),
  # saved once, at step 10 (the kill lands after it).
  study=(--config.train.steps=20 --config.train.steps_per_call=10)
  kill_study=("${study[@]}" --config.checkpoint_every=10 "--config.grid.depth=[1, 2]")
  torch_device=cpu
else
  study=()
  kill_study=()
  torch_device=cuda
fi

# limit_for LIMIT: the step's limit cut to the cap and to the time left (0: none left).
limit_for() {
  local limit=$1 left=$((deadline - SECONDS))
  [ "$limit" -gt "$cap" ] && limit=$cap
  [ "$limit" -gt "$left" ] && limit=$left
  echo $((limit > 0 ? limit : 0))
}
# skip NAME WHY: a step not run, and why (absent / quick mode / out of time).
skip() { echo "$2" >"$work/$1.skipped"; echo "gpu_check: $1: $2" >&2; }
# run_step NAME LIMIT CMD...: CMD under the step's limit; stdout, stderr, status, the
# command and its start and end times go to $work/NAME.{out,err,rc,cmd,s}.
# other_part NAME: true (and NAME marked skipped unless an earlier part ran it: its result in
# the same $work stays as it is) when GPU_CHECK_STEPS leaves NAME out.
other_part() {
  [ -n "$only" ] && [[ " $only " != *" $1 "* ]] || return 1
  [ -e "$work/$1.rc" ] || skip "$1" "skipped: not in GPU_CHECK_STEPS"
}
run_step() {
  local name=$1 limit; limit=$(limit_for "$2"); shift 2
  other_part "$name" && return
  rm -f "$work/$name.skipped"
  if [ "$limit" -lt 5 ]; then
    skip "$name" "skipped: out of time (GPU_CHECK_DEADLINE)"; return
  fi
  echo "gpu_check: $name (limit ${limit} s): $*" >&2
  printf '%s\n' "$@" >"$work/$name.cmd"
  local t0=$EPOCHREALTIME
  timeout -k 15 "$limit" "$@" >"$work/$name.out" 2>"$work/$name.err"
  echo $? >"$work/$name.rc"
  echo "$t0 $EPOCHREALTIME" >"$work/$name.s"
}
# step NAME LIMIT ARGS...: `python -m depthscale.cli ARGS...` as a step.
step() { local name=$1 limit=$2; shift 2; run_step "$name" "$limit" "$PYTHON" -m depthscale.cli "$@"; }
# torch_step NAME LIMIT PRESET ARGS...: tools/torch_baseline.py as a step.
torch_step() {
  local name=$1 limit=$2 preset=$3; shift 3
  run_step "$name" "$limit" "$TORCH_PYTHON" tools/torch_baseline.py --preset "$preset" \
    --device "$torch_device" --json "$work/$name.json" "$@"
}
minutes() { other_part "$1" || skip "$1" "skipped: quick mode (minutes on a CPU)"; }

if [ "$quick" = 1 ]; then
  ablate=(--rounds 1 --depth 2 --dtype float32)  # bench's CPU size of the paper preset
  probe=(--steps 2 --dtype float32)  # as ablate: bf16 compiles and runs slower on a CPU
  reach=experiments/reachability_depth.py:smoke
else
  ablate=(--rounds 5)
  probe=()
  reach=experiments/reachability_depth.py
fi
# the paper shape's engine (bench_paper, gelu_paper's and ablation_paper's first variant):
# compiled once, kept in this cache (the session's later parts run on the same machine); in
# quick mode the one cache above, which the test suite's processes share
if [ "$quick" = 1 ]; then
  paper_cache=()
else
  paper_cache=(env JAX_COMPILATION_CACHE_DIR="$work/paper-cache")
fi

# Issue 60, item 1: the paper shape under run's settings against torch.compile, and the
# A5 smoke study killed once and rerun.
run_step settings 30 "$PYTHON" tools/gpu/run_settings.py --json "$work/settings.json"
if [ "$quick" = 1 ]; then
  # the benches take minutes on a CPU; their JSON's merge is tested on made-up ones
  for name in bench_paper torch_paper; do minutes "$name"; done
else
  run_step bench_paper 150 "${paper_cache[@]}" "$PYTHON" -m depthscale.cli bench --preset paper \
    --json "$work/bench_paper.json"
  torch_step torch_paper 100 paper12 --dtype bfloat16 --models 3 --steps 20 --repeats 2 \
    --warmup 3 --variants eager,compile
fi
other_part a5_kill_rerun || rm -rf "$work/a5_kill"
run_step a5_kill_rerun 200 "$PYTHON" tools/gpu/kill_rerun.py --workdir "$work/a5_kill" \
  --json "$work/a5_kill_rerun.json" -- --config experiments/a5_depth.py:smoke --no-progress \
  "${kill_study[@]}"

# Item 2: can run keep cuDNN (drop its flag)? Item 4: the GELU that keeps only its input.
run_step determinism 150 "$PYTHON" tools/gpu/determinism_probe.py "${probe[@]}" \
  --json "$work/determinism.json"
run_step gelu_paper 150 "${paper_cache[@]}" "$PYTHON" tools/gpu/option_ablation.py \
  --preset paper "${ablate[@]}" --json "$work/gelu_paper.json" --variant defaults= \
  --variant "gelu recompute=gelu:recompute"

# Item 3: the rest of the speed table, and a5_depth's probed plan in GPU-hours.
if [ "$quick" = 1 ]; then
  for name in bench_medium torch_medium bench_tiny torch_tiny plan_a5 ablation_paper; do
    minutes "$name"
  done
else
  step bench_medium 60 bench --preset medium --dtype bfloat16 --models 64 \
    --json "$work/bench_medium.json"
  torch_step torch_medium 60 medium --dtype bfloat16 --models 64 --models-sequential 2 \
    --steps 20 --repeats 2 --variants eager,compile_ro,func_vmap
  step bench_tiny 70 bench --preset tiny --models 256 --json "$work/bench_tiny.json"
  torch_step torch_tiny 60 tiny --models 256 --models-sequential 2 --steps 50 --repeats 2 \
    --variants eager,compile_ro,func_vmap
  step plan_a5 180 plan --config experiments/a5_depth.py --no-progress \
    "--config.grid.depth=[6, 12, 24]" --json "$work/plan_a5.json"
fi
step plan_a5_flops 20 plan --config experiments/a5_depth.py --device h100 \
  --json "$work/plan_a5_flops.json"
step devices_float32 30 devices --json --dtype float32
step devices_bfloat16 30 devices --json --dtype bfloat16

# Item 5: reachability at its accelerator sizes, the lengths its probed plan says fit.
step reach_plan 180 plan --config "$reach" --no-progress "${study[@]}" \
  --json "$work/reach_plan.json"
if other_part reach_run; then :  # an earlier part's run keeps its workdir
elif [ ! -s "$work/reach_plan.json" ] || [ "$(cat "$work/reach_plan.rc" 2>/dev/null)" != 0 ]; then
  skip reach_run "skipped: no plan (reach_plan did not write one)"
else
  rm -rf "$work/reach"
  run_step reach_run 420 "$PYTHON" tools/gpu/science_run.py --plan "$work/reach_plan.json" \
    --budget "$(limit_for 420)" --workdir "$work/reach" --json "$work/reach_run.json" -- \
    --config "$reach" --no-progress "${study[@]}"
fi

# What earlier checks ran besides (the `all` session, or GPU_CHECK_STEPS naming them).
if [ "$quick" != 1 ]; then
  run_step ablation_paper 120 "${paper_cache[@]}" "$PYTHON" tools/gpu/option_ablation.py \
    --preset paper --rounds 3 --json "$work/ablation_paper.json" --variant defaults= \
    --variant "remat block=remat:block" --variant "cudnn=attention:cudnn"
fi
if [ "${GPU_CHECK_MIXED:-0}" != 1 ]; then
  skip bench_mixed "skipped: GPU_CHECK_MIXED=1 runs it (about 110 s on an H200)"
elif ! "$PYTHON" -m depthscale.cli bench --help 2>/dev/null | grep -Eq -- '--preset \{[^}]*\bmixed\b'; then
  skip bench_mixed absent
else
  step bench_mixed 120 bench --preset mixed --json "$work/bench_mixed.json"
fi
step plan 45 plan --config experiments/quickstart.py:smoke --no-progress "${study[@]}" \
  --json "$work/plan.json"
step plan_smoke_flops 20 plan --config experiments/quickstart.py:smoke --device h100 \
  "${study[@]}" --json "$work/plan_smoke_flops.json"
other_part run || rm -rf "$work/smoke"  # an earlier part's run keeps its workdir
step run 45 run --config experiments/quickstart.py:smoke --no-progress "${study[@]}" \
  --workdir "$work/smoke"

"$PYTHON" tools/gpu/gpu_check.py "$work" "$out" --quick "$quick"
