#!/usr/bin/env bash
# A GEMM-core experiment from binaries built on the CPU machine: GEMM_BIN holds detmoe_gemm_test
# and detmoe_perf_gemm (lib/ beside it for libbenchmark). Runs the tests named by GEMM_TESTS,
# memcheck of them (or of GEMM_MEMCHECK_TESTS), the whole GEMM test binary, then the benchmarks
# named by GEMM_BENCH; a benchmark that fails is rerun under memcheck with GEMM_BENCH_MEMCHECK as
# its filter (default GEMM_BENCH), so the log names the faulting access.
#   OUT=dir GEMM_BIN=.abbin/gather GEMM_TESTS='GemmGather*' \
#     GEMM_BENCH='grouped/.*_up_forward/(ours|ours_gather_a|cublas_per_expert)/' bash ci/device-gemm-prebuilt.sh
#   (carry .devdeps and the folder holding GEMM_BIN)
source "$(dirname "$0")/device-call.sh"
source ci/device-env.sh
bin=${GEMM_BIN:?}
export LD_LIBRARY_PATH=$PWD/$bin/../lib:$LD_LIBRARY_PATH
chmod +x "$bin"/detmoe_* 2>/dev/null
step "tests ${GEMM_TESTS:?}"
timeout 60 "$bin/detmoe_gemm_test" --gtest_filter="$GEMM_TESTS" >"$OUT/named-tests.log" 2>&1
echo "exit $?"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|Failure|differing' "$OUT/named-tests.log" | head -12
step "memcheck of them"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/detmoe_gemm_test" \
  --gtest_filter="${GEMM_MEMCHECK_TESTS:-$GEMM_TESTS}" >"$OUT/memcheck.log" 2>&1
echo "memcheck exit $?"; grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | head -4
step "all GEMM tests"
timeout 150 "$bin/detmoe_gemm_test" >"$OUT/gemm-tests.log" 2>&1
echo "gemm tests exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$OUT/gemm-tests.log" | head -8
step "benchmarks ${GEMM_BENCH:?} ($(left) s left)"
timeout $(( $(left) - 10 )) "$bin/detmoe_perf_gemm" --benchmark_filter="$GEMM_BENCH" \
  --benchmark_out="$OUT/bench.json" --benchmark_out_format=json >"$OUT/bench.log" 2>&1
bench_rc=$?
echo "bench exit $bench_rc"; grep -E '^gemm/' "$OUT/bench.log" | sed -E 's/ +/ /g' | cut -c1-200
if [ "$bench_rc" -ne 0 ] && [ "$(left)" -gt 40 ]; then
  grep -vE '^gemm/' "$OUT/bench.log" | tail -4
  step "benchmark under memcheck ($(left) s left)"
  timeout $(( $(left) - 5 )) compute-sanitizer --tool memcheck --print-limit 4 "$bin/detmoe_perf_gemm" \
    --benchmark_filter="${GEMM_BENCH_MEMCHECK:-$GEMM_BENCH}" >"$OUT/bench-memcheck.log" 2>&1
  echo "exit $?"; grep -E -A6 'Invalid|rror' "$OUT/bench-memcheck.log" | head -30
fi
step done
