#!/usr/bin/env bash
# Where gpt-oss-120b's backward loses 1.8 ms under zipf1 (docs/PERF.md session 27, "Left for the
# next session" item 2), in one call: each kernel's own time on both routings (the fused launch apart
# from the weight-gradient launches), the fused launch's task timeline on both routings, then an A/B
# of the weight-gradient knob's arms on gpt-oss (zipf1 and balanced, the reference in each round).
#   ci/ab-knob-trees.sh build .abbin auto 'gu=--wgrad-launch=gate-up-later' 'fused=--wgrad-launch=fused'
#   OUT=dir BUDGET_S=420 bash ci/device-gptoss-zipf.sh        (carry .devdeps .abbin)
source "$(dirname "$0")/device-call.sh"
use_prebuilt
out=$OUT
step "ncu kernel times, megakernel gpt-oss-120b, both routings ($(left) s left)"
OUT=$out/kt BUDGET_S=200 BIN=.abbin/auto KT_SHAPES=gpt-oss-120b KT_ROUTINGS='balanced zipf1' KT_IMPLS=megakernel \
  bash ci/device-kernel-times.sh | grep -vE '^==PROF'
for routing in balanced zipf1; do
  step "trace, gpt-oss-120b $routing ($(left) s left)"
  timeout 60 .abbin/auto/detmoe_perf_layer --impls=megakernel --routings="$routing" --shapes=gpt-oss-120b --timed=5 \
    --trace >"$out/trace-$routing.log" 2>&1
  echo "trace exit $?"; grep -E 'task timeline|bwd |busy' "$out/trace-$routing.log" | head -24
done
step "A/B of the knob's arms ($(left) s left)"
OUT=$out/ab BUDGET_S=$(( $(left) - 10 )) AB_BIN=.abbin AB_NAMES='auto gu fused' AB_ROUNDS=2 AB_REF=round \
  AB_ROUTING=zipf1,balanced AB_SHAPES=gpt-oss-120b AB_SANITIZE=0 AB_TESTS='MegakernelBackwardD1.*' TESTS_LIMIT=30 \
  AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=20 AB_ROUND_SLACK=10 bash ci/device-ab-prebuilt.sh
step done
