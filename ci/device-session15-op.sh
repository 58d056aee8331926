#!/usr/bin/env bash
# Session 15's last device call: the PyTorch op with the fused backward (impl="megakernel"):
# build the op against the GPU machine's torch, run its new test and the ones the change touches.
#   OUT=dir bash ci/device-session15-op.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
PY=/opt/torch/.venv/bin/python
step build
export DETMOE_CMAKE_ARGS="-DDETMOE_TORCH_PYTHON=$PY"
build_device detmoe_torch
step "op tests"
PYTHONPATH=$PWD/build-device/python DETMOE_SOURCE_DIR=$PWD timeout 200 ci/run-op-tests.sh "$PY" \
  test_megakernel_training_step test_auto_picks test_capturing_a_training_step test_rerun_is_bitwise test_megakernel_forward_equals \
  >"$OUT/op-tests.log" 2>&1
echo "op tests exit $?"; grep -E "^(ok|skipped|FAILED)|op tests:|^  |Error|error" "$OUT/op-tests.log" | head -40
step done
