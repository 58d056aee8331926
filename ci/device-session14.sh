#!/usr/bin/env bash
# Session 14's one device call (the machine gave one start): build, the backward's and the
# combine's GPU tests, the same-run bench (megakernel + reference + the PyTorch pipeline, four
# shapes, balanced and zipf1, with the task timelines), golden bits, sanitizers on a small
# backward case, then as many MegakernelBackwardProperty problems as the time left allows.
#   OUT=dir bash ci/device-session14.sh     (carry .devdeps)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/summary.txt") 2>&1
start=$SECONDS
left() { echo $(( ${BUDGET_S:-570} - (SECONDS - start) )); }
step() { echo "== $1 ($(( SECONDS - start )) s in)"; }
step build
ci/device-build.sh build-device detmoe detmoe_perf_layer detmoe_layer_test >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
source ci/device-env.sh
B=build-device; T=$B/tests/megakernel/detmoe_layer_test
step tests
timeout 150 $T --gtest_filter='*Backward*-*NamedShapes*:*Property*:MegakernelCombine.*:Small/MegakernelVsReference.*' >"$OUT/tests.log" 2>&1
echo "tests exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$OUT/tests.log" | head -12
step bench
timeout 300 $B/detmoe bench --impl megakernel --trace --json "$OUT/bench.json" >"$OUT/bench.log" 2>&1
echo "bench exit $?"; grep -vE '^ +(GEMM|bwd|plan|dispatch|weighted|kind|busy)|^task|^megakernel/|^reference/|last timed launch' "$OUT/bench.log" | tail -45
step golden
timeout 60 $B/detmoe golden check --impl megakernel 2>&1 | tail -1
for tool in memcheck racecheck; do
  [ "$(left)" -gt 70 ] || break
  step "$tool"
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $T --gtest_filter='Small/MegakernelBackward.*/0' >"$OUT/san-$tool.log" 2>&1
  echo "$tool exit $?"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/san-$tool.log" | head -3
done
if [ "$(left)" -gt 40 ]; then
  step "property ($(left) s left)"
  RC_PARAMS="max_success=300" timeout $(( $(left) - 15 )) $T --gtest_filter='MegakernelBackwardProperty.*' >"$OUT/property.log" 2>&1
  echo "property exit $?"; grep -E 'OK, passed|Falsifiable|Gave up|PASSED|FAILED' "$OUT/property.log" | head -4; tail -c 600 "$OUT/property.log"
fi
if [ "$(left)" -gt 135 ]; then
  step "named shapes vs reference"
  timeout $(( $(left) - 10 )) $T --gtest_filter='MegakernelBackwardNamedShapes.MatchReference' >"$OUT/named.log" 2>&1
  echo "named exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure' "$OUT/named.log" | head -5
fi
step done
