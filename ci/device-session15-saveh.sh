#!/usr/bin/env bash
# Session 15: the megakernel backward with save_h = false (h recomputed by the GEMM core into dh
# before the launch) — its bitwise test against the saved-h run, verify against the oracle, the
# backward property with save_h drawn, memcheck of one recomputing run, and its cost in the bench.
#   OUT=dir BUDGET_S=420 bash ci/device-session15-saveh.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
step build
build_device detmoe detmoe_layer_test detmoe_perf_layer
B=build-device
step "tests"
layer_tests tests 120 'MegakernelBackwardSaveH.*:*Ragged*:Small/MegakernelBackward.*'
step "verify --recompute-h"
for s in small-shared deepseek-v3; do
  extra=""; [ $s = deepseek-v3 ] && extra="--no-oracle"
  timeout 100 $B/detmoe verify --impl megakernel --shape $s --routing zipf1 --recompute-h $extra >"$OUT/verify-$s.log" 2>&1
  echo "verify $s exit $?"; grep -E '^(out|y|d_x|d_topk_w|dw_|dws_)|PASS|FAIL' "$OUT/verify-$s.log" | head -12
done
step "memcheck"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/detmoe verify --impl megakernel --shape small-shared \
  --routing zipf1 --recompute-h --no-oracle >"$OUT/memcheck.log" 2>&1; echo "memcheck exit $?"; tail -3 "$OUT/memcheck.log"
step "bench deepseek, qwen3 fwd+bwd, h saved / recomputed"
for flag in "" --no-save-h; do
  timeout 100 $B/perf/detmoe_perf_layer --impls=megakernel --shapes=qwen3-30b-a3b,deepseek-v3 --routings=balanced --timed=20 \
    $flag >>"$OUT/bench.log" 2>&1; echo "bench $flag exit $?"
done
grep -E "^megakernel/" "$OUT/bench.log" | sed 's/ \+/ /g' | cut -c1-160
if [ "$(left)" -gt 60 ]; then
  step "property ($(left) s left)"
  backward_property $(( $(left) - 10 ))
fi
step done
