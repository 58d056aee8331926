#!/usr/bin/env bash
# Session 21, one call: (1) the GEMM core's gathered-A forms (ci/device-gather-diag.sh, MODES),
# (2) the fused forward with GEMM1 gathering x in place (LayerParams::gather_x, env
# DETMOE_GATHER_X=1, P = 1): the megakernel GPU tests without it (the producer is now a warp),
# the forward tests with it, compute-sanitizer on a forward with it, then forward-only timing
# rounds gx-on / gx / base (AB_BIN/<name>/detmoe_perf_layer; gxon is a wrapper setting the env).
#   OUT=dir BUDGET_S=... bash ci/device-gather-layer.sh   (carry .devdeps .abbin)
source "$(dirname "$0")/device-call.sh"
source ci/device-env.sh
bin=.abbin
export LD_LIBRARY_PATH=$PWD/$bin/lib:$LD_LIBRARY_PATH
export DETMOE_SOURCE_DIR=$PWD
chmod +x "$bin"/*/detmoe* 2>/dev/null
# (1) GEMM core, each case in its own process.
cases=$("$bin/gather/detmoe_gemm_test" --gtest_list_tests --gtest_filter='GemmGatherA/*:GemmGatherA.*' | awk '/^[^ ]/{s=$1} /^  /{print s $1}')
for mode in ${MODES:-4 0}; do
  step "gemm gather mode $mode ($(left) s left)"
  for c in $cases; do
    # the per-row TMA form (mode 0) only on the cases that split its fault's suspects
    [ "$mode" = 0 ] && case "$c" in *LongKOneTilePerCta|*ShortKManyTiles|*LongKManyTiles|*LongKManyTilesOneEach) ;; *) continue;; esac
    DETMOE_GATHER_MODE=$mode timeout 40 "$bin/gather/detmoe_gemm_test" --gtest_filter="$c" >"$OUT/m$mode-$c.log" 2>&1
    echo "  $c: exit $? $(grep -E 'differing|Which is: [0-9]+$' "$OUT/m$mode-$c.log" | head -1)"
  done
  DETMOE_GATHER_MODE=$mode timeout 40 "$bin/gather/detmoe_perf_gemm" \
    --benchmark_filter='grouped/(qwen3|deepseek).*_up_forward/(ours|ours_gather_a)/' >"$OUT/gemm-bench-m$mode.log" 2>&1
  echo "bench exit $?"; grep -E '^gemm/' "$OUT/gemm-bench-m$mode.log" | sed -E 's/ +/ /g' | cut -c1-150
done
# (2) the fused forward.
mkdir -p build-device && cp "$bin/gx/detmoe" build-device/detmoe
fwd='MegakernelGolden.*:MegakernelD0.*:MegakernelD1.*:MegakernelD3.*:Small/MegakernelVsReference.*:MegakernelNamedShapes.*:MegakernelLayer.*:MegakernelCombine.*:MegakernelGraph.*'
# The producer-warp change touches the forward kernel only: its tests, the fault ones (the fake
# stages after an abort) and the plan's.
step "forward megakernel tests, gather off ($(left) s left)"
timeout "${TESTS_LIMIT:-80}" "$bin/gx/detmoe_layer_test" \
  --gtest_filter="$fwd:MegakernelFaults.*:MegakernelPlan.*:MegakernelD2.*:LayerTrace*" >"$OUT/tests.log" 2>&1
echo "tests exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure' "$OUT/tests.log" | head -12
step "forward tests, DETMOE_GATHER_X=1 ($(left) s left)"
DETMOE_GATHER_X=1 timeout 60 "$bin/gx/detmoe_layer_test" --gtest_filter="$fwd" >"$OUT/tests-gx.log" 2>&1
gx_rc=$?
echo "tests exit $gx_rc"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure' "$OUT/tests-gx.log" | head -12
# A hang (exit 124) is a stage-ring bug: nothing after it would run either.
[ "$gx_rc" -eq 124 ] && { tail -5 "$OUT/tests-gx.log"; step done; exit 0; }
for tool in racecheck memcheck; do
  step "$tool forward, DETMOE_GATHER_X=1"
  DETMOE_GATHER_X=1 timeout 45 compute-sanitizer --tool "$tool" --error-exitcode 9 build-device/detmoe verify \
    --impl megakernel --forward-only --shape small-shared --routing zipf1 >"$OUT/san-$tool.log" 2>&1
  echo "$tool exit $?"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Hazard|PASS|FAIL|rror' "$OUT/san-$tool.log" | head -4
done
for round in 1 2; do
  for name in ${AB_NAMES:-gxon gx base}; do
    [ "$(left)" -gt 40 ] || break 2
    step "round $round $name ($(left) s left)"
    timeout $(( $(left) - 20 )) "$bin/$name/detmoe_perf_layer" --impls=megakernel --routings=balanced \
      --shapes=deepseek-v3,mixtral-8x7b,qwen3-30b-a3b,gpt-oss-120b --timed=20 --warmup-seconds=1 \
      --benchmark_filter='fwd/' --benchmark_out="$OUT/ab-$name-$round.json" --benchmark_out_format=json >"$OUT/ab-$name-$round.log" 2>&1
    echo "exit $?: $(python3 -c '
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    print(b["name"].split("/iterations")[0].replace("megakernel/", ""), "%.3f" % b["median_ms"], end="  |  ")
' "$OUT/ab-$name-$round.json" 2>&1)"
  done
done
if [ "$(left)" -gt 30 ]; then
  step "reference ($(left) s left)"
  timeout $(( $(left) - 10 )) "$bin/base/detmoe_perf_layer" --impls=reference --routings=balanced \
    --shapes=deepseek-v3,mixtral-8x7b,qwen3-30b-a3b,gpt-oss-120b --timed=20 --warmup-seconds=1 --benchmark_filter='fwd/' \
    --benchmark_out="$OUT/ab-reference.json" --benchmark_out_format=json >"$OUT/ab-reference.log" 2>&1
  echo "exit $?: $(python3 -c '
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    print(b["name"].split("/iterations")[0], "%.3f" % b["median_ms"], end="  |  ")
' "$OUT/ab-reference.json" 2>&1)"
fi
step done
