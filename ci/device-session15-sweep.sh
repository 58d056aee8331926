#!/usr/bin/env bash
# Session 15's sixth device call: which row counts cuBLAS's one-call transposed-A weight-gradient
# GEMM gets wrong, at which output sizes, and whether the head + 128-row-block tail form is clean
# (tests/reference/cublas_wgrad_sweep_test).
#   OUT=dir bash ci/device-session15-sweep.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
build_device cublas_wgrad_sweep_test
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ls /usr/local/cuda/lib64/libcublas.so.* 2>/dev/null | head -3
timeout 300 build-device/tests/reference/cublas_wgrad_sweep_test 2>&1 | tee "$OUT/sweep.log" | grep -vE '^\[ +RUN' | tail -40
