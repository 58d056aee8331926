#!/usr/bin/env bash
# Session 37: the fused forward's band as the default (kDefaultForwardBandMBlocks 16 → 32), both
# routings and all four shapes. Session 36's three rounds on an H100 (overlap rows 4096 through the
# knob, balanced only) put it at −0.7 to −3 % on deepseek-v3 and mixtral-8x7b; session 31 had it
# level (±0.5 %) on both routings. Trees prebuilt here (carry .devdeps .abbin): .abbin/main =
# main before the change (ci/ab-knob-trees.sh build .abbin main), .abbin/b32 = the change.
# First the GEMM core's wave gate (branch gemm-band, .abbin/gate = its detmoe_gemm_test and
# detmoe_perf_gemm, stripped): every N waves of the static deal each producer waits for all CTAs
# (GroupedGemm::wave_gate), so CTAs that drifted apart start their shared panels together again.
# 0. the gate's schedule and validate tests;
# 1. the core: default / gate 1 / gate 2 / tickets / cuBLAS per expert on mixtral-8x7b's dx and
#    deepseek-v3's up-projection, default / gate 1 / gate 2 on both shapes' dW_gate_up (fp32, the
#    layer's launch), time and J; ncu's DRAM bytes of mixtral-8x7b's dx and dW_gate_up, ours and gate 1;
# then the forward band:
# 2. the b32 tree's megakernel GPU tests (its D1 arms sweep the band; the default arm is now 32);
# 3. forward only, two rounds, main and b32 alternating, the reference in every round.
#   OUT=dir BUDGET_S=540 bash ci/device-session37.sh
source "$(dirname "$0")/device-call.sh"
use_prebuilt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
step "wave gate tests ($(left) s left)"
gtest_run gate-tests 90 .abbin/gate/detmoe_gemm_test '*GemmSchedule.*:GemmValidate.*'
step "the core with wave gates, time and energy ($(left) s left)"
timeout 120 .abbin/gate/detmoe_perf_gemm --deals=gate1,gate2,tickets \
  --benchmark_filter='grouped/(mixtral-8x7b_up_(data_grad|weight_grad_fp32out)|deepseek-v3_up_(forward|weight_grad_fp32out))/' \
  --benchmark_out="$OUT/gemm-gates.json" --benchmark_out_format=json >"$OUT/gemm-gates.log" 2>&1
echo "exit $?"; python3 perf/bench_medians.py "$OUT/gemm-gates.json" --strip gemm/grouped/ 2>&1 | head -24
step "ncu: the gates' DRAM bytes ($(left) s left)"
OUT=$OUT/gate-ncu BUDGET_S=80 BIN=.abbin/gate GEMM_NCU_IMPLS='ours ours_gate1' GEMM_NCU_ARGS='--deals=gate1' \
  GEMM_NCU_CASE='mixtral-8x7b_up_data_grad mixtral-8x7b_up_weight_grad_fp32out' bash ci/device-gemm-ncu.sh
step "b32 tests ($(left) s left)"
gtest_run tests 150 .abbin/b32/detmoe_layer_test 'Megakernel*:LayerTrace*:LayerSchedule*-*NamedShapes.MatchReference:*Property.Random*'
fwd_round() {  # TREE IMPL FILE
  timeout $(( $(left) - 10 )) ".abbin/$1/detmoe_perf_layer" --impls="$2" --routings=balanced,zipf1 \
    --shapes=deepseek-v3,mixtral-8x7b,qwen3-30b-a3b,gpt-oss-120b --timed=20 --warmup-seconds=1 \
    --benchmark_filter='/fwd(/|$)' --benchmark_out="$OUT/$3.json" --benchmark_out_format=json >"$OUT/$3.log" 2>&1
  echo "$3 exit $?"; python3 perf/bench_medians.py "$OUT/$3.json" 2>&1 | head -12
}
for round in 1 2; do
  step "round $round ($(left) s left)"
  [ "$(left)" -gt 60 ] || break
  if [ "$round" = 1 ]; then order="main b32"; else order="b32 main"; fi
  for tree in $order; do fwd_round "$tree" megakernel "fwd-$tree-r$round"; done
  fwd_round main reference "fwd-reference-r$round"
done
step done
