#!/usr/bin/env bash
# Session 16's last device call, on the final tree (after the row-table window moved into a
# host+device header): the megakernel's GPU tests with the forward property test at 300 problems,
# and both golden checks.
#   OUT=dir bash ci/device-session16-last.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
step build
build_device detmoe detmoe_layer_test
B=build-device
step tests
RC_PARAMS="max_success=300" layer_tests tests $(( $(left) - 60 )) \
  'Megakernel*:LayerTrace*:LayerSizes*-*NamedShapes.MatchReference:*BackwardProperty.Random*:MegakernelCombine.*'
step golden
for impl in megakernel reference; do timeout 60 $B/detmoe golden check --impl $impl 2>&1 | tail -1; done
step done
