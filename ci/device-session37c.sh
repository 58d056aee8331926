#!/usr/bin/env bash
# Session 37's last call, now the mechanism call behind ci/device-session38.sh (which times and
# tests the same changes, combined, against main with the reference and alternated rounds).
# Trees prebuilt here (carry .devdeps and MECH_BIN, default .abbin): main = main; MECH_DXG (default
# dxg) = a tree whose backward gates its long-K dx tiles per wave (branch dx-gate, later land).
# 1. ncu DRAM bytes and clock: the dx-gate tree's backward launch against main's, mixtral-8x7b
#    balanced (the shape it targets; down-band's forward row went with session 39's refutation);
# 2. bits: one custom problem whose dx tiles are gated (F 8192: 256 k-blocks; 512 dx tiles), every
#    output of main and the MECH_DXG tree compared byte for byte;
# 3. if time is left: the GEMM core's evict-first stores on the layer's dW_gate_up launches (branch
#    gemm-band 4e28b3e, .abbin/gate: detmoe_gemm_test + detmoe_perf_gemm) — their test, time and J,
#    and ncu's DRAM bytes on mixtral-8x7b (plain: 5.1–5.7 GB read for 1.07 GB of operands).
#   OUT=dir BUDGET_S=300 bash ci/device-session37c.sh
# Session 39's plan: MECH_BIN=.abbin2 MECH_DXG=land, after the landing check of
# ci/device-session38.sh in the same call.
source "$(dirname "$0")/device-call.sh"
mech=${MECH_BIN:-.abbin}; dxg=${MECH_DXG:-dxg}
use_prebuilt "$mech"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
step "ncu bytes ($(left) s left)"
kt() {  # TREE KERNEL: that launch alone under ncu (ci/device-kernel-times.sh), mixtral-8x7b balanced
  OUT=$OUT/kt-$1-$2 BUDGET_S=70 BIN=$mech/$1 KT_SHAPES=mixtral-8x7b KT_IMPLS=megakernel KT_ARGS="--kernel-name regex:$2" \
    KT_METRICS=dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second bash ci/device-kernel-times.sh
}
kt main layer_backward_kernel
kt "$dxg" layer_backward_kernel
step "bits: main against $dxg on a gated problem ($(left) s left)"
compare_outputs "$mech" main "$dxg"
if [ -x .abbin/gate/detmoe_perf_gemm ] && [ "$(left)" -gt 60 ]; then
  step "evict-first stores on the weight gradients ($(left) s left)"
  gtest_run stream-tests 30 .abbin/gate/detmoe_gemm_test '*StreamStores*:*WaveGate*'
  timeout 40 .abbin/gate/detmoe_perf_gemm --deals=stream_c \
    --benchmark_filter='grouped/(mixtral-8x7b|deepseek-v3)_up_weight_grad_fp32out/' \
    --benchmark_out="$OUT/gemm-stream.json" --benchmark_out_format=json >"$OUT/gemm-stream.log" 2>&1
  echo "exit $?"; python3 perf/bench_medians.py "$OUT/gemm-stream.json" --strip gemm/grouped/ 2>&1 | head -6
  [ "$(left)" -gt 45 ] && OUT=$OUT/stream-ncu BUDGET_S=$(( $(left) - 5 )) BIN=.abbin/gate GEMM_NCU_IMPLS='ours ours_stream_c' \
    GEMM_NCU_ARGS='--deals=stream_c' GEMM_NCU_CASE='mixtral-8x7b_up_weight_grad_fp32out' bash ci/device-gemm-ncu.sh
fi
step done
