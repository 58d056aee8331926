#!/usr/bin/env bash
# Session 37: the fused forward's band as the default (kDefaultForwardBandMBlocks 16 → 32), both
# routings and all four shapes. Session 36's three rounds on an H100 (overlap rows 4096 through the
# knob, balanced only) put it at −0.7 to −3 % on deepseek-v3 and mixtral-8x7b; session 31 had it
# level (±0.5 %) on both routings. Trees prebuilt here (carry .devdeps .abbin): .abbin/main =
# main before the change (ci/ab-knob-trees.sh build .abbin main), .abbin/b32 = the change.
# 1. the b32 tree's megakernel GPU tests (its D1 arms sweep the band; the default arm is now 32);
# 2. forward only, two rounds, main and b32 alternating, the reference in every round.
#   OUT=dir BUDGET_S=400 bash ci/device-session37.sh
source "$(dirname "$0")/device-call.sh"
use_prebuilt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
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
