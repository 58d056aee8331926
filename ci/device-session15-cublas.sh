#!/usr/bin/env bash
# Session 15's fifth device call: is the reference's rank-two dW error cuBLAS's (the GEMM alone,
# tests/reference/cublas_wgrad_test) or the layer's (one expert of exactly 4226 rows through
# `detmoe verify --impl reference`)?
#   OUT=dir bash ci/device-session15-cublas.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
build_device detmoe cublas_wgrad_test
B=build-device
timeout 120 $B/tests/reference/cublas_wgrad_test >"$OUT/cublas.log" 2>&1; echo "cublas_wgrad_test exit $?"
grep -E "^\[ +(OK|FAILED|PASSED) |worst error" "$OUT/cublas.log" | head -40
for T in 4226 4224 4098; do
  timeout 60 $B/detmoe verify --impl reference --T $T --H 64 --F 64 --E 1 --k 1 --routing balanced --seed 0 >"$OUT/verify-$T.log" 2>&1
  echo "-- reference T=$T E=1 k=1 (exit $?)"; grep -E '^dw_' "$OUT/verify-$T.log"
done
