#!/usr/bin/env bash
# The per-row TMA gather experiment (GroupedGemm::a_gather, branch wip/gather-a): is one box
# {64, 1} per row a correct wgmma operand (bitwise the contiguous A) and fast enough (up-projection
# TFLOP/s against the contiguous A, same call)? Build, the GEMM tests (gather cases first), memcheck
# of the gather cases, then the four shapes' up-projections contiguous vs gathered.
#   OUT=dir BUDGET_S=300 bash ci/device-gather-a.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
step build
build_device detmoe_gemm_test detmoe_perf_gemm
B=build-device
step "gather tests"
timeout 60 $B/tests/megakernel/detmoe_gemm_test --gtest_filter='GemmGather*' 2>&1 | grep -E '^\[  (PASSED|FAILED|SKIPPED)|Failure|differing' | head -12
step "memcheck (gather)"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/megakernel/detmoe_gemm_test \
  --gtest_filter='GemmGather*' >"$OUT/memcheck.log" 2>&1
echo "memcheck exit $?"; grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | head -4
step "all GEMM tests"
timeout 150 $B/tests/megakernel/detmoe_gemm_test >"$OUT/gemm-tests.log" 2>&1
echo "gemm tests exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$OUT/gemm-tests.log" | head -8
step "up-projections, contiguous vs gathered ($(left) s left)"
timeout $(( $(left) - 10 )) $B/perf/detmoe_perf_gemm --benchmark_filter='grouped/.*_up_forward/(ours|ours_gather_a|cublas_per_expert)/' \
  --benchmark_out="$OUT/gather.json" --benchmark_out_format=json >"$OUT/gather.log" 2>&1
echo "bench exit $?"; grep -E '^gemm/' "$OUT/gather.log" | sed -E 's/ +/ /g' | cut -c1-200
step done
