#!/usr/bin/env bash
# Session 16's first device call: run on the GPU what session 15 edited after its last GPU run
# (recompute_h refactor, the CublasGemm split refactor, the op's context fix), then ncu's
# per-instruction warp-stall samples of deepseek-v3's fused forward (where the epilogues wait).
#   OUT=dir bash ci/device-session16.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
PY=/opt/torch/.venv/bin/python
B=build-device
step build
export DETMOE_CMAKE_ARGS="-DDETMOE_TORCH_PYTHON=$PY"
build_device detmoe detmoe_layer_test reference_layer_test cublas_wgrad_test cublas_wgrad_sweep_test detmoe_torch
step "gpu tests"
layer_tests mk 150 'MegakernelBackwardSaveH.*:*Ragged*:*Session14*:Small/MegakernelBackward.*:MegakernelPropertyKnobs.*'
for t in reference/reference_layer_test reference/cublas_wgrad_test reference/cublas_wgrad_sweep_test; do
  timeout 120 $B/tests/$t >"$OUT/ref.log" 2>&1; echo "$t exit $?"
  grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$OUT/ref.log" | head -4
done
step golden
for impl in reference megakernel; do timeout 120 $B/detmoe golden check --impl $impl 2>&1 | tail -1; done
step "op tests"
PYTHONPATH=$PWD/$B/python DETMOE_SOURCE_DIR=$PWD timeout 200 ci/run-op-tests.sh "$PY" \
  test_megakernel_training_step test_auto_picks test_capturing_a_training_step test_rerun_is_bitwise test_megakernel_forward_equals \
  >"$OUT/op-tests.log" 2>&1
echo "op tests exit $?"; grep -E "^(ok|skipped|FAILED)|op tests:|^  |Error|error" "$OUT/op-tests.log" | head -30
step "ncu source counters, deepseek-v3 fwd ($(left) s left)"
timeout $(( $(left) - 20 )) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:layer_forward \
  --launch-count 1 -f -o "$OUT/fwd" $B/detmoe verify --impl megakernel --shape deepseek-v3 --forward-only --no-oracle \
  >"$OUT/ncu.log" 2>&1
echo "ncu exit $?"; tail -3 "$OUT/ncu.log"
ncu -i "$OUT/fwd.ncu-rep" --page source --csv --print-source sass >"$OUT/sass.csv" 2>"$OUT/sass.err"
echo "source page exit $? ($(wc -l <"$OUT/sass.csv") lines)"; head -c 600 "$OUT/sass.err"
python3 perf/ncu_hotspots.py "$OUT/sass.csv" --top 30 --context 2 >"$OUT/stalls.txt"; head -60 "$OUT/stalls.txt"
gzip -f "$OUT/sass.csv"; rm -f "$OUT/fwd.ncu-rep"
step done
