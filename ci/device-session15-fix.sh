#!/usr/bin/env bash
# Session 15's seventh device call: the reference's split weight-gradient GEMMs (ref::wgrad_tail_rows)
# on the H200 — the cuBLAS tests and sweep, the reference layer's tests (new: ragged row counts
# against the oracle without the Σ|terms| clause), the megakernel's ragged/named/session-14 tests,
# the reference's golden hashes (recorded afresh into $OUT/hashes when they moved), then the
# backward property with 300 problems.
#   OUT=dir BUDGET_S=420 bash ci/device-session15-fix.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
step build
build_device detmoe detmoe_layer_test cublas_wgrad_test cublas_wgrad_sweep_test reference_layer_test
B=build-device
summary() { grep -E '^\[  (PASSED|FAILED)|FAILED  \]|SKIPPED  \]|failed [0-9]|Failure|worst error' "$1" | head -${2:-12}; }
step "cublas_wgrad_test"; timeout 60 $B/tests/reference/cublas_wgrad_test >"$OUT/cublas.log" 2>&1; echo "exit $?"; summary "$OUT/cublas.log"
step "sweep"; timeout 120 $B/tests/reference/cublas_wgrad_sweep_test >"$OUT/sweep.log" 2>&1; echo "exit $?"
grep -E "^M=|reference's form|PASSED|FAILED" "$OUT/sweep.log" | head -40
step "reference_layer_test"; timeout 150 $B/tests/reference/reference_layer_test >"$OUT/reference.log" 2>&1; echo "exit $?"; summary "$OUT/reference.log" 20
step "megakernel tests"
layer_tests mk 120 '*Ragged*:*Session14*:MegakernelBackwardNamedShapes.*:Small/MegakernelBackward.*'
step "golden check reference"
timeout 120 $B/detmoe golden check --impl reference >"$OUT/golden.log" 2>&1; rc=$?; echo "exit $rc"; tail -25 "$OUT/golden.log"
if [ $rc -ne 0 ]; then
  mkdir -p "$OUT/hashes"; cp golden/hashes/*.json "$OUT/hashes/"
  timeout 120 $B/detmoe golden record --impl reference --dir "$OUT/hashes" >"$OUT/golden-record.log" 2>&1; echo "record exit $?"; tail -5 "$OUT/golden-record.log"
fi
if [ "$(left)" -gt 60 ]; then
  step "property ($(left) s left)"
  backward_property $(( $(left) - 15 ))
fi
step done
