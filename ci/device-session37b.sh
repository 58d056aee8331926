#!/usr/bin/env bash
# Session 37's third call: the forward's GEMM2 in bands of 8 m-blocks (kDefaultForwardDownBandMBlocks;
# GEMM1 keeps 16). Call 2 showed drift is what the GEMM core's excess DRAM bytes are (a wave gate
# took mixtral-8x7b's dx from 10.1–10.5 to 5.6–5.7 GB, the lockstep figure); in the fused forward
# GEMM2's tiles start at uneven times after GEMM1's, and tile_drift_dram.py --spread 1 gives
# mixtral-8x7b's GEMM2 8.2 GB at band 16 (its 62 MB band of a does not fit L2) against 2.4 at 8,
# deepseek-v3's 1.21 at both. Trees prebuilt here (carry .devdeps .abbin): .abbin/main = main
# before the change, .abbin/d8 = the change (ci/ab-knob-trees.sh build .abbin d8).
# 1. d8's megakernel GPU tests; 2. ncu DRAM bytes and clock of the forward launch, both trees,
# mixtral-8x7b and deepseek-v3; 3. forward only, two rounds alternating, reference in each round.
#   OUT=dir BUDGET_S=420 bash ci/device-session37b.sh
source "$(dirname "$0")/device-call.sh"
use_prebuilt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
step "d8 tests ($(left) s left)"
gtest_run tests 150 .abbin/d8/detmoe_layer_test 'Megakernel*:LayerTrace*:LayerSchedule*-*NamedShapes.MatchReference:*Property.Random*'
step "ncu: the forward launch's DRAM bytes ($(left) s left)"
for tree in main d8; do
  for shape in mixtral-8x7b deepseek-v3; do
    f="$OUT/fwd-ncu-$tree-$shape"
    timeout 40 ncu --clock-control none --kernel-name regex:layer_forward_kernel --csv --print-units base \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second \
      ".abbin/$tree/detmoe" verify --impl megakernel --shape "$shape" --routing balanced --no-oracle >"$f.csv" 2>"$f.err"
    echo "$tree $shape: ncu exit $?"
    python3 perf/kernel_times.py "$f.csv" --runs 2 \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second >"$f.txt" 2>&1
    grep -E "launch|ms/step" "$f.txt" | head -4
  done
done
fwd_round() {  # TREE IMPL FILE
  timeout $(( $(left) - 10 )) ".abbin/$1/detmoe_perf_layer" --impls="$2" --routings=balanced,zipf1 \
    --shapes=deepseek-v3,mixtral-8x7b,qwen3-30b-a3b,gpt-oss-120b --timed=20 --warmup-seconds=1 \
    --benchmark_filter='/fwd(/|$)' --benchmark_out="$OUT/$3.json" --benchmark_out_format=json >"$OUT/$3.log" 2>&1
  echo "$3 exit $?"; python3 perf/bench_medians.py "$OUT/$3.json" 2>&1 | head -12
}
for round in 1 2; do
  step "round $round ($(left) s left)"
  [ "$(left)" -gt 60 ] || break
  if [ "$round" = 1 ]; then order="main d8"; else order="d8 main"; fi
  for tree in $order; do fwd_round "$tree" megakernel "fwd-$tree-r$round"; done
  fwd_round main reference "fwd-reference-r$round"
done
step done
