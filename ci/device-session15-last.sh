#!/usr/bin/env bash
# Session 15's last device call, on the final tree: the ragged-row tests of both GPU paths, the
# reference layer's tests, the small backward cases, both GPU golden checks, and `detmoe accept
# --level 1` (the README's main job) on the H200.
#   OUT=dir bash ci/device-session15-last.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
step build
build_device detmoe detmoe_layer_test reference_layer_test
B=build-device
step "tests"
timeout 100 $B/tests/reference/reference_layer_test >"$OUT/reference.log" 2>&1; echo "reference_layer_test exit $?"
grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$OUT/reference.log" | head -5
layer_tests mk 150 '*Ragged*:*Session14*:Small/MegakernelBackward.*:MegakernelPropertyKnobs.*'
step "golden"
for impl in reference megakernel; do timeout 120 $B/detmoe golden check --impl $impl 2>&1 | tail -1; done
step "accept --level 1"
timeout 200 $B/detmoe accept --level 1 >"$OUT/accept.log" 2>&1; echo "accept exit $?"; tail -25 "$OUT/accept.log"
step done
