#!/usr/bin/env bash
# Where gpt-oss-120b's backward loses 1.8 ms under zipf1 (docs/PERF.md session 27, "Left for the
# next session" item 2), in one call: each kernel's own time on both routings (the fused launch apart
# from the weight-gradient launches), the fused launch's task timeline on both routings, then an A/B
# of the weight-gradient knob's arms on gpt-oss (zipf1 and balanced, the reference in each round).
#   ci/ab-knob-trees.sh build .abbin auto 'gu=--wgrad-launch=gate-up-later' 'fused=--wgrad-launch=fused'
#   OUT=dir BUDGET_S=420 bash ci/device-gptoss-zipf.sh        (carry .devdeps .abbin)
source "$(dirname "$0")/device-call.sh"
source ci/device-env.sh
export LD_LIBRARY_PATH=$PWD/.abbin/lib:$LD_LIBRARY_PATH DETMOE_SOURCE_DIR=$PWD
chmod +x .abbin/*/detmoe* 2>/dev/null
out=$OUT
for routing in balanced zipf1; do
  step "ncu kernel times, megakernel gpt-oss-120b $routing ($(left) s left)"
  f="$out/kt-$routing"
  timeout 90 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
    .abbin/auto/detmoe verify --impl megakernel --shape gpt-oss-120b --routing "$routing" --no-oracle >"$f.csv" 2>"$f.err"
  echo "ncu exit $?"; python3 perf/kernel_times.py "$f.csv" --runs 2 | head -12; gzip -f "$f.csv"
done
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
