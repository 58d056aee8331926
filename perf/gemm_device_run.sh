#!/usr/bin/env bash
# One device call for the GEMM core: tests, SASS check, benchmarks (ours, cuBLAS,
# torch._grouped_mm), the report, then compute-sanitizer. Logs go to $OUT.
#
#   perf/gemm_device_run.sh [BIN_DIR]
#
# BIN_DIR holds prebuilt detmoe_gemm_test / detmoe_perf_gemm (+ lib/ with libbenchmark and
# libfmt); if they do not run on this machine, the targets are built here with
# ci/device-build.sh. Every step has a timeout: a hang is reported, never waited out.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gemm-out}
mkdir -p "$OUT"
BIN=${1:-out-gemm}
source ci/device-env.sh
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$LD_LIBRARY_PATH
PY=/opt/torch/.venv/bin/python
SUMMARY=$OUT/summary.log
log() { echo "$*" | tee -a "$SUMMARY"; }

T=$BIN/detmoe_gemm_test
P=$BIN/detmoe_perf_gemm
if ! "$T" --gtest_list_tests >/dev/null 2>&1 || ! "$P" --benchmark_list_tests >/dev/null 2>&1; then
  log "prebuilt binaries do not run here; building"
  start=$(date +%s)
  ci/device-build.sh build-device detmoe_gemm_test detmoe_perf_gemm > "$OUT/build.log" 2>&1 || { log "build failed"; tail -30 "$OUT/build.log"; exit 1; }
  log "build took $(( $(date +%s) - start )) s"
  T=build-device/tests/megakernel/detmoe_gemm_test
  P=build-device/perf/detmoe_perf_gemm
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv | tee -a "$SUMMARY"

if [ "${GEMM_TESTS:-1}" = 1 ]; then
log "== tests (one process per test, so a fault cannot hide the tests after it)"
"$T" --gtest_list_tests | awk '/^[^ ]/ {suite=$1} /^  / {print suite $1}' > /tmp/gemm_tests.txt
: > "$OUT/tests.log"
pass=0; fail=0
while read -r t; do
  timeout 120 "$T" --gtest_filter="$t" >> "$OUT/tests.log" 2>&1; rc=$?
  if [ $rc -eq 0 ]; then pass=$((pass+1)); else fail=$((fail+1)); log "FAILED rc=$rc $t"; fi
done < /tmp/gemm_tests.txt
log "tests: $pass passed, $fail failed"
grep -E "cuBLAS   \]|SKIPPED \] [A-Z]" "$OUT/tests.log" | sort -u | head -20 | tee -a "$SUMMARY"
for t in ${GEMM_MEMCHECK_TESTS:-}; do
  timeout 200 compute-sanitizer --tool memcheck --show-backtrace device "$T" --gtest_filter="$t" > /tmp/memcheck_one.log 2>&1
  log "memcheck $t rc=$?"; grep -vE "^=========$" /tmp/memcheck_one.log | head -60 >> "$OUT/sanitizer.log"
done
fi

# Mutants (built with a deliberate bug, see docs/PERF.md): the tests must catch each one.
for m in "$BIN"/mutant/*; do
  [ -x "$m" ] || continue
  timeout 120 "$m" --gtest_filter='Layouts/GemmExact.*:GemmCublas.ForwardGrouped:GemmCublas.WeightGradGrouped' > /tmp/mutant.log 2>&1
  rc=$?
  log "mutant $(basename "$m"): rc=$rc, $(grep -cE '^\[  FAILED  \] .*\([0-9]+ ms\)$' /tmp/mutant.log) failing tests (must be > 0)"
done

log "== SASS"
cuobjdump --dump-sass "$T" 2>/dev/null | grep -oE "HGMMA\.[A-Z0-9.x]+" | sort | uniq -c | tee -a "$SUMMARY"

if [ "${GEMM_BENCH:-1}" = 1 ]; then
log "== benchmarks"
SEG=/tmp/gemm_segments.json
DETMOE_GEMM_SEGMENTS_OUT=$SEG timeout 300 "$P" --benchmark_out="$OUT/bench.json" --benchmark_out_format=json \
  --benchmark_counters_tabular=true > /tmp/gemm_bench.log 2>&1; log "bench rc=$?"
grep -vE "^\*\*\*|^-+$" /tmp/gemm_bench.log | tail -40 | tee -a "$SUMMARY"
timeout 200 "$PY" perf/gemm_grouped_torch.py "$SEG" "$OUT/torch.json" >> "$SUMMARY" 2>&1; log "torch rc=$?"
"$PY" perf/gemm_report.py "$OUT/bench.json" "$OUT/torch.json" "$OUT/gemm_h200.json" | tee -a "$SUMMARY"
fi

if [ "${GEMM_SANITIZE:-1}" = 1 ]; then
log "== compute-sanitizer"
for tool in memcheck racecheck synccheck; do
  extra=""
  [ "$tool" = racecheck ] && extra="--racecheck-report all"
  timeout 150 compute-sanitizer --tool $tool $extra --error-exitcode 1 "$T" --gtest_filter='GemmSanitizerCase.*' \
    > /tmp/sanitizer_$tool.log 2>&1
  log "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/sanitizer_$tool.log | tr '\n' ' ')"
  { echo "===== $tool"; head -c 200000 /tmp/sanitizer_$tool.log; } >> "$OUT/sanitizer.log"
done
fi
