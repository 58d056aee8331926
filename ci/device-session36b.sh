#!/usr/bin/env bash
# Session 36's second call: is the GEMM core's 2.4× cuBLAS DRAM read (call 1 on an H100: mixtral-8x7b
# dx 10.5–10.8 GB against 4.4 for cuBLAS per expert; band 16 and the L2 hints did not lower it) the
# CTAs' drift in a ten-wave persistent launch? cuBLAS's per-expert launches (≈ 1.3 waves each) start
# every launch in step; the core's static deal keeps tile i on CTA i mod 132 for all ten waves, so
# the eight CTAs that share a weight panel may run far apart by the late waves. Binaries prebuilt
# here (carry .devdeps .abbin): .abbin/main = main's detmoe/perf_layer (ci/ab-knob-trees.sh build
# .abbin main); .abbin/gemm = branch gemm-band's detmoe_gemm_test + detmoe_perf_gemm
# (worktree ../band, ninja -C ../band/build detmoe_gemm_test detmoe_perf_gemm, stripped).
# 1. gemm-band's schedule and validate tests (tickets_always, L2 hints, bands);
# 2. the core: default deal / tickets for every tile / one launch per expert / cuBLAS per expert,
#    time and J, on mixtral-8x7b's dx and deepseek-v3's up-projection forward; then ncu's DRAM bytes
#    of the ticket and per-expert variants of mixtral-8x7b's dx;
# 3. the fused forward's band (overlap rows 0 = 16 m-blocks, 4096 = 32) in two rounds;
# 4. ncu per kernel: DRAM bytes and SM clock of the fused launches and the reference's kernels.
#   OUT=dir BUDGET_S=420 bash ci/device-session36b.sh
source "$(dirname "$0")/device-call.sh"
use_prebuilt
out=$OUT
step "gemm-band tests ($(left) s left)"
gtest_run gemm-tests 90 .abbin/gemm/detmoe_gemm_test '*GemmSchedule.*:GemmValidate.*'
step "the core's deals, time and energy ($(left) s left)"
timeout 100 .abbin/gemm/detmoe_perf_gemm --deals=tickets,per_expert \
  --benchmark_filter='grouped/(mixtral-8x7b_up_data_grad|deepseek-v3_up_forward)/' \
  --benchmark_out="$out/gemm-deals.json" --benchmark_out_format=json >"$out/gemm-deals.log" 2>&1
echo "exit $?"; python3 perf/bench_medians.py "$out/gemm-deals.json" --strip gemm/grouped/ 2>&1 | head -20
step "ncu: the deals' DRAM bytes ($(left) s left)"
OUT=$out/gemm-ncu BUDGET_S=60 BIN=.abbin/gemm GEMM_NCU_IMPLS='ours_tickets ours_per_expert' GEMM_NCU_ARGS='--deals=tickets,per_expert' \
  GEMM_NCU_CASE='mixtral-8x7b_up_data_grad' bash ci/device-gemm-ncu.sh
step "fused forward band, two rounds ($(left) s left)"
for round in 1 2; do
  timeout 60 .abbin/main/detmoe_perf_layer --impls=megakernel,reference --routings=balanced \
    --shapes=deepseek-v3,mixtral-8x7b --knobs=0:0,0:4096 --timed=20 --warmup-seconds=1 --benchmark_filter='/fwd(/|$)' \
    --benchmark_out="$out/fwd-band-r$round.json" --benchmark_out_format=json >"$out/fwd-band-r$round.log" 2>&1
  echo "round $round exit $?"; python3 perf/bench_medians.py "$out/fwd-band-r$round.json" 2>&1 | head -20
done
step "ncu per kernel, fused against reference ($(left) s left)"
OUT=$out/kt BUDGET_S=$(( $(left) - 5 )) BIN=.abbin/main KT_SHAPES='mixtral-8x7b deepseek-v3' \
  KT_IMPLS='megakernel reference' KT_METRICS=dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second \
  bash ci/device-kernel-times.sh
step done
