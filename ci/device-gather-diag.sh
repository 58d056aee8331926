#!/usr/bin/env bash
# Session 21: locate the gathered-A fault. Each GemmGatherA case runs in its own process (a
# fault is sticky) under each issue form of GroupedGemm::a_gather_mode (bit 0: one thread
# issues the 128 row boxes; bit 1: plain 2-D row map; 4: cp.async by the producer warpgroup), then qwen3's up-projection benchmark
# (contiguous vs gathered) under each form that passed the multi-tile case.
#   OUT=dir GEMM_BIN=.abbin/gather MODES='0 1 2 3' bash ci/device-gather-diag.sh   (carry .devdeps .abbin)
source "$(dirname "$0")/device-call.sh"
source ci/device-env.sh
bin=${GEMM_BIN:?}
export LD_LIBRARY_PATH=$PWD/$bin/../lib:$LD_LIBRARY_PATH
chmod +x "$bin"/detmoe_* 2>/dev/null
cases=$("$bin/detmoe_gemm_test" --gtest_list_tests --gtest_filter='GemmGatherA/*:GemmGatherA.*' | awk '/^[^ ]/{s=$1} /^  /{print s $1}')
passed_modes=""
for mode in ${MODES:-4 0 1 2 3}; do
  step "mode $mode ($(left) s left)"
  ok_many=1
  for c in $cases; do
    [ "$(left)" -lt 60 ] && { echo "out of time"; break; }
    DETMOE_GATHER_MODE=$mode timeout 60 "$bin/detmoe_gemm_test" --gtest_filter="$c" >"$OUT/m$mode-$c.log" 2>&1
    rc=$?
    echo "  $c: exit $rc $(grep -E 'differing|Which is: [0-9]+$' "$OUT/m$mode-$c.log" | head -1)"
    case "$c" in *LongKManyTiles) [ $rc -ne 0 ] && ok_many=0;; esac
  done
  [ $ok_many -eq 1 ] && passed_modes="$passed_modes $mode"
done
step "SASS of the forward kernels"
cuobjdump -sass "$bin/detmoe_perf_gemm" 2>/dev/null | grep -c UTMALDG
for mode in $passed_modes; do
  [ "$(left)" -lt 30 ] && break
  step "benchmark, mode $mode ($(left) s left)"
  DETMOE_GATHER_MODE=$mode timeout 60 "$bin/detmoe_perf_gemm" \
    --benchmark_filter='grouped/(qwen3|deepseek).*_up_forward/(ours|ours_gather_a)/' \
    --benchmark_out="$OUT/bench-m$mode.json" --benchmark_out_format=json >"$OUT/bench-m$mode.log" 2>&1
  echo "exit $?"; grep -E '^gemm/' "$OUT/bench-m$mode.log" | sed -E 's/ +/ /g' | cut -c1-160
done
step done
