#!/usr/bin/env bash
# Session 40's call B, the mechanism behind call A's rounds (trees as ci/device-session40.sh's):
# 1. the layer's weight-gradient GEMMs of deepseek-v3, mixtral-8x7b and gpt-oss-120b (fp32 out) in
#    the GEMM core, time and J per launch: ours (fixed bands, plain stores) / ours_order /
#    ours_stream / ours_order_stream / ours_ring (the deep store ring) / ours_order_stream_ring
#    (detmoe_perf_gemm, median of 30 launches);
# 2. ncu DRAM bytes and SM clock of ours against ours_order_stream (and ours_order on mixtral's
#    dW_gate_up) — the prediction is perf/wgrad_order_dram.py's (docs/PERF.md "Session 40");
# 3. bits: every output of main and lw on one problem whose dx tiles the gate holds and whose
#    weight-gradient experts take both orders (F 8192: 256 k-blocks; 1,024 rows per expert).
#   OUT=dir BUDGET_S=300 bash ci/device-session40b.sh
source "$(dirname "$0")/device-call.sh"
use_prebuilt .abbin2
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
step "weight-gradient GEMMs ($(left) s left)"
timeout 180 .abbin2/lw/detmoe_perf_gemm --benchmark_filter='grouped/(deepseek-v3|mixtral-8x7b|gpt-oss-120b)_(up|down)_weight_grad_fp32out/' \
  --benchmark_out="$OUT/wgrad-gemm.json" --benchmark_out_format=json >"$OUT/wgrad-gemm.log" 2>&1
echo "exit $?"; python3 perf/bench_medians.py "$OUT/wgrad-gemm.json" --strip gemm/grouped/ 2>&1 | head -40
step "bits: main against lw ($(left) s left)"
compare_outputs .abbin2 main lw
for case in mixtral-8x7b_up_weight_grad_fp32out deepseek-v3_up_weight_grad_fp32out mixtral-8x7b_down_weight_grad_fp32out; do
  impls='ours ours_order_stream'
  [ "$case" = mixtral-8x7b_up_weight_grad_fp32out ] && impls='ours ours_order ours_order_stream'
  [ "$(left)" -gt 60 ] || break
  OUT=$OUT/ncu-$case BUDGET_S=$(( $(left) - 5 )) BIN=.abbin2/lw GEMM_NCU_IMPLS="$impls" GEMM_NCU_CASE=$case \
    bash ci/device-gemm-ncu.sh
done
step done
