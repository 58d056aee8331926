#!/usr/bin/env bash
# The next call (docs/PERF.md sessions 31–32), one machine; the A/B (2) runs first, the GEMM tests (1)
# and the ncu step (4) only with the time left after the traces (3):
#  1. the GEMM core's ticket deal (branch wgrad-tickets): GemmSchedule.* and GemmValidate.* of its
#     build, memcheck and racecheck on the ticket test;
#  2. the A/B: roll = branch dswiglu-rolled (main + the dSwiGLU epilogue's slice loop rolled: ncu put
#     58 % of that epilogue's stall samples on instruction fetch), first tree, so the layer tests,
#     racecheck / memcheck at P = 1 and 4 and golden run on it (they also cover main's data-grad band
#     default); tk1 = branch wgrad-tickets run with --wgrad-tickets=1 (the tk tree's build), base =
#     main: roll − base is the rolled epilogue, tk1 − base the ticket deal with the GEMM core's 56/224
#     register split (the static-deal tk tree is left out of the rounds: device time); tk's backward
#     D-tests and golden beside it; two rounds on both routings with the reference in each, torch after;
#  3. the task timelines of roll, base and roll2 (branch dswiglu-rolled2: the batch loop rolled too;
#     only its detmoe_perf_layer in .abbin/roll2) on mixtral-8x7b balanced (the dSwiGLU epilogue per
#     da tile: 18.2 µs on c1c01a1);
#  4. if time is left, the weight-gradient launches' DRAM bytes on gpt-oss-120b zipf1 under tk1
#     (session 31: 3.3 + 6.8 GB read with the static deal against 0.9 + 1.9 balanced).
# Before it, on the CPU machine (≈ 12 minutes):
#   ci/ab-rev-trees.sh .abbin tk=wgrad-tickets base=main roll=dswiglu-rolled
#   ci/ab-knob-trees.sh /tmp/detmoe-ab/tk/build .abbin tk 'tk1=--wgrad-tickets=1'
#   ninja -C /tmp/detmoe-ab/tk/build detmoe_gemm_test && mkdir -p .abbin/gemm &&
#     cp /tmp/detmoe-ab/tk/build/tests/megakernel/detmoe_gemm_test .abbin/gemm/ && strip .abbin/gemm/*
#   ci/ab-rev-trees.sh /tmp/abbin-r2 roll2=dswiglu-rolled2 && mkdir -p .abbin/roll2 &&
#     cp /tmp/abbin-r2/roll2/detmoe_perf_layer .abbin/roll2/
#   OUT=dir BUDGET_S=560 bash ci/device-session32.sh        (carry .devdeps .abbin; ≈ 44 MB)
# A short call (≈ 250 s of device time): S32_NAMES='roll base' S32_TORCH=0 S32_ROUND_MIN=35
#   AB_ROUND_SLACK=20 AB_SHAPES=mixtral-8x7b,deepseek-v3 OUT=dir BUDGET_S=240 bash ci/device-session32.sh
source "$(dirname "$0")/device-call.sh"
use_prebuilt
out=$OUT
OUT=$out/ab BUDGET_S=$(( $(left) - 70 )) AB_BIN=.abbin AB_NAMES="${S32_NAMES:-roll base tk1}" AB_ROUNDS=2 AB_REF=round AB_TORCH=${S32_TORCH:-1} \
  AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=${S32_ROUND_MIN:-60} bash ci/device-ab-prebuilt.sh
for tree in roll base roll2; do
  [ -x .abbin/$tree/detmoe_perf_layer ] || continue
  [ "$(left)" -gt 40 ] || break
  step "trace, $tree, mixtral-8x7b balanced ($(left) s left)"
  timeout $(( $(left) < 40 ? $(left) - 3 : 40 )) .abbin/$tree/detmoe_perf_layer --impls=megakernel --routings=balanced --shapes=mixtral-8x7b --timed=5 \
    --trace >"$out/trace-$tree-mixtral.log" 2>&1
  echo "trace exit $?"; grep -vE '^(Run on|CPU Caches|  L[123]|Load Average|-----)' "$out/trace-$tree-mixtral.log" | head -60
done
if [ "$(left)" -gt 80 ]; then
  step "GEMM core schedule and validation tests (branch wgrad-tickets)"
  timeout 90 .abbin/gemm/detmoe_gemm_test --gtest_filter='*GemmSchedule.*:GemmValidate.*' >"$out/gemm-tests.log" 2>&1
  echo "gemm tests exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure' "$out/gemm-tests.log" | head -8
  for tool in memcheck racecheck; do
    step "$tool on the ticket test"
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 .abbin/gemm/detmoe_gemm_test \
      --gtest_filter='*GemmSchedule.TicketDealDoesNotChangeBits/WeightGrad' >"$out/gemm-$tool.log" 2>&1
    echo "$tool exit $?"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/gemm-$tool.log" | head -3
  done
  step "tk's backward D-tests (tickets in the weight-gradient launches) and golden"
  timeout 60 .abbin/tk/detmoe_layer_test --gtest_filter='MegakernelBackwardD*:MegakernelBackwardGraph*' >"$out/tk-tests.log" 2>&1
  echo "tk tests exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure' "$out/tk-tests.log" | head -8
  timeout 60 .abbin/tk/detmoe golden check --impl megakernel 2>&1 | tail -1
fi
# `detmoe verify` has no knob flags: ncu over the tk1 bench's first four weight-gradient launches
# (two steps' dW_down and dW_gate_up; caches flushed before each kernel, the GPU's own clocks).
[ "$(left)" -gt 50 ] || { step "done (no time for the ncu step)"; exit 0; }
step "ncu, weight-gradient launches with tickets, gpt-oss-120b zipf1 ($(left) s left)"
timeout $(( $(left) - 5 )) ncu --clock-control none --kernel-name regex:grouped_gemm --launch-count 4 \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct --csv --print-units base \
  --log-file "$out/kt-tk1-gpt-oss-zipf1.csv" \
  .abbin/tk1/detmoe_perf_layer --impls=megakernel --shapes=gpt-oss-120b --routings=zipf1 --timed=1 \
  >"$out/kt-tk1.log" 2>&1
echo "ncu exit $?"; python3 perf/kernel_times.py "$out/kt-tk1-gpt-oss-zipf1.csv" --runs 2 \
  --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct | head -12
step done
