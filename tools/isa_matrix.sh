#!/usr/bin/env bash
# The learning tests (pytest -m learning) and the drift guard (tests/test_drift.py) under
# each instruction-set cap XLA's CPU backend takes, with their margins: another CPU rounds differently, and these caps give this
# machine several of those roundings (../shared/SPEED.md, BUILD_NOTES "Learning margins").
#   tools/isa_matrix.sh                 # every cap this CPU supports
#   ISAS="AVX2 SSE4_2" tools/isa_matrix.sh
#   ISA_QUICKSTART=1 tools/isa_matrix.sh  # also `make run`'s study per cap (minutes each):
#                                         # best n* per depth and hardest k per depth
# The AVX512 cap also sets --xla_cpu_prefer_vector_width=512 (XLA's default, 256, keeps its
# code at AVX2's width on an AVX-512 CPU). A cap the CPU lacks is skipped and said; a cap
# that did not take effect (XLA accepts any value silently) is checked with
# tools/isa_seen.py and fails the script. Exit 1 if a test failed under any cap.
# Logs: $ISA_WORK (default a temp dir).
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
work=${ISA_WORK:-$(mktemp -d /tmp/isa_matrix.XXXXXX)}
mkdir -p "$work"
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
declare -A cpu_flag=([SSE4_2]=sse4_2 [AVX]=avx [AVX2]=avx2 [AVX512]=avx512f)
status=0
for isa in ${ISAS:-SSE4_2 AVX AVX2 AVX512}; do
  if [[ -z "${cpu_flag[$isa]:-}" ]]; then
    echo "$isa: not a cap this script knows (SSE4_2 AVX AVX2 AVX512)"; status=1; continue
  fi
  if [[ "$flags" != *" ${cpu_flag[$isa]} "* ]]; then
    echo "$isa: skipped, this CPU lacks ${cpu_flag[$isa]}"; continue
  fi
  export XLA_FLAGS="--xla_cpu_max_isa=$isa"
  # XLA prefers 256-bit vectors by default, so under the AVX512 cap its own code is AVX2's
  # unless 512-bit vectors are asked for too
  [[ $isa = AVX512 ]] && XLA_FLAGS="$XLA_FLAGS --xla_cpu_prefer_vector_width=512"
  seen=$("$PYTHON" tools/isa_seen.py) || { echo "$isa: tools/isa_seen.py failed"; status=1; continue; }
  if [[ "$seen" != "$isa" ]]; then
    echo "$isa: the cap did not take effect (XLA generated $seen code)"; status=1; continue
  fi
  log="$work/learning-$isa.log"
  t0=$SECONDS
  "$PYTHON" -m pytest -q -s -p no:cacheprovider -m learning tests >"$log" 2>&1
  rc=$?
  "$PYTHON" -m pytest -q -s -p no:cacheprovider tests/test_drift.py >>"$log" 2>&1
  drift=$?
  [[ $rc = 0 && $drift = 0 ]] || status=1
  echo "$isa: pytest -m learning exit $rc, tests/test_drift.py exit $drift in" \
    "$((SECONDS - t0)) s"
  grep -o 'margin .*' "$log" | sed 's/^/  /'
  if [[ "${ISA_QUICKSTART:-0}" = 1 ]]; then
    qs="$work/quickstart-$isa"
    rm -rf "$qs"
    t0=$SECONDS
    if "$PYTHON" experiments/quickstart.py --workdir "$qs" >"$work/quickstart-$isa.log" 2>&1; then
      echo "  quickstart in $((SECONDS - t0)) s: $("$PYTHON" tools/quickstart_outcomes.py "$qs")"
    else
      echo "  quickstart FAILED (log $work/quickstart-$isa.log)"; status=1
    fi
  fi
  unset XLA_FLAGS
done
echo "logs: $work"
exit $status
