#!/usr/bin/env bash
# One device call for the forward megakernel (issue 5) and the gate (issue 6): build, the gate
# with stored speed medians and a planted change, then the megakernel tests filter by filter
# (time-boxed: a wrong kernel may hang inside a CTA), compute-sanitizer on a small case, and
# `detmoe bench --impl megakernel` when asked. Logs to $OUT.
#   OUT=dir MK_FILTERS='...' MK_SANITIZE=1 MK_BENCH=1|first MK_BENCH_ARGS='--routing balanced --trace' \
#     MK_KNOBS='0:0,16:0,0:512' MK_SANITIZE_TOOLS='memcheck racecheck synccheck' \
#     MK_SANITIZE_FILTER='MegakernelCombine.*' perf/megakernel_device_run.sh
# Each refused machine start costs device time: batch everything into one call.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$root/out-device}
mkdir -p "$OUT"
source "$root/ci/device-env.sh"
start=$(date +%s)
left() { echo $(( ${MK_BUDGET_S:-540} - ($(date +%s) - start) )); }
step() { echo; echo "=== $* ($(date +%T), $(left) s left)"; }
log=$OUT/megakernel-run.log
{
  step build
  "$root/ci/device-build.sh" build-device 2>&1 | grep -E "error|FAILED|Linking CXX executable detmoe$" | head -20
  cd "$root/build-device" || exit 1
  if [ "${MK_GATE:-1}" = 1 ] && [ "$(left)" -gt 100 ]; then
    step gate: stored speed medians, the gate, a planted change
    ./detmoe golden record --impl reference --store "$root/golden-store" | tail -1
    ./perf/detmoe_perf_layer --shapes=qwen3-30b-a3b --routings=balanced --benchmark_filter=/fwd/ --benchmark_repetitions=5 \
      --benchmark_report_aggregates_only=true --benchmark_format=json >"$OUT/gate-perf-reference-h200.json"
    cp "$OUT/gate-perf-reference-h200.json" "$root/ci/"
    sed 's|"golden": {"impls": \["oracle", "reference", "megakernel"\]}|"golden": {"impls": ["oracle", "reference", "megakernel"], "store": "../golden-store"}|' \
      "$root/ci/gate-baseline-gpu.json" >"$root/ci/gate-baseline-gpu-store.json"
    ./detmoe gate --baseline "$root/ci/gate-baseline-gpu-store.json" --report "$OUT/gate-report.json" | grep -vE "^Pass golden"
    echo "gate exit ${PIPESTATUS[0]}"
    DETMOE_TEST_PLANT=combine-reversed ./detmoe gate --baseline "$root/ci/gate-baseline-gpu-store.json" \
      --report "$OUT/gate-planted-report.json" | grep -E "FAIL|Fail|gate" | grep -v "golden/oracle" | head -14
    echo "planted gate exit ${PIPESTATUS[0]}"
  fi
  bench() {
    step bench --impl megakernel
    timeout $(( $(left) > 230 ? 180 : $(left) - 50 )) ./detmoe bench --impl megakernel ${MK_BENCH_ARGS:-} --json "$OUT/bench-megakernel.json" 2>&1 | tee "$OUT/bench-megakernel.log" | tail -30
  }
  # MK_BENCH=first: the bench before the tests (when the budget is short and speed is the question).
  [ "${MK_BENCH:-0}" = first ] && bench
  step megakernel tests
  mk=./tests/megakernel/detmoe_layer_test
  filters=${MK_FILTERS:-'MegakernelPlan.*:LayerSizes.*:LayerTrace.*:MegakernelTrace.* MegakernelFaults.* MegakernelLayer.*:MegakernelCombine.* *MegakernelVsReference* MegakernelD*:MegakernelGraph.* MegakernelNamedShapes.* MegakernelProperty.*'}
  for f in $filters; do
    [ "$(left)" -lt 40 ] && { echo "SKIPPED $f: out of time"; continue; }
    echo "--- $f" >>"$OUT/megakernel.log"
    # The fp64 oracle of the named shapes needs minutes (host data for every expert's weights).
    box=50; case $f in *Oracle*|MegakernelNamedShapes.\*) box=150 ;; esac
    RC_PARAMS="max_success=${MK_RC:-30}" timeout $box $mk --gtest_filter="$f" >>"$OUT/megakernel.log" 2>&1
    echo "$f exit $?"
  done
  if [ "${MK_GEMM_TESTS:-1}" = 1 ] && [ "$(left)" -gt 80 ]; then
    timeout 60 ./tests/megakernel/detmoe_gemm_test >"$OUT/gemm-test.log" 2>&1
    echo "detmoe_gemm_test exit $?"; grep -E "^\[ *(PASSED|FAILED) *\]|tests ran" "$OUT/gemm-test.log" | head -12
  fi
  grep -E "^\[ *(OK|FAILED) *\]" "$OUT/megakernel.log" | grep -v "listed below" | sort | uniq | head -60
  # MK_KNOBS='0:0,16:0,0:512': time the megakernel under comm_sms:overlap_rows settings (speed only).
  if [ -n "${MK_KNOBS:-}" ] && [ "$(left)" -gt 60 ]; then
    step knob sweep ${MK_KNOBS}
    timeout $(( $(left) - 30 )) ./perf/detmoe_perf_layer --impls=megakernel --routings=balanced \
      --shapes="${MK_KNOB_SHAPES:-gpt-oss-120b,qwen3-30b-a3b}" --knobs="$MK_KNOBS" --benchmark_counters_tabular=true \
      --benchmark_out="$OUT/knobs.json" --benchmark_out_format=json 2>&1 | grep -E "megakernel/|detmoe_perf" | cut -c1-150
  fi
  if [ "${MK_SANITIZE:-1}" = 1 ] && [ "$(left)" -gt 100 ]; then
    for tool in ${MK_SANITIZE_TOOLS:-memcheck racecheck}; do
      [ "$(left)" -lt 95 ] && break
      step compute-sanitizer $tool on a small case
      timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 $mk \
        --gtest_filter="${MK_SANITIZE_FILTER:-MegakernelCombine.*}" >"$OUT/sanitizer-$tool.log" 2>&1
      echo "$tool exit $?"; tail -4 "$OUT/sanitizer-$tool.log"
    done
  fi
  # MK_BENCH=1: the bench last, once the tests and the sanitizers have run.
  [ "${MK_BENCH:-0}" = 1 ] && [ "$(left)" -gt 90 ] && bench
  step done
} >"$log" 2>&1
tail -80 "$log"
