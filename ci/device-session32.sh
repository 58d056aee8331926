#!/usr/bin/env bash
# The next call (docs/PERF.md session 31, "Left for the next session"), one machine:
#  1. the GEMM core's ticket deal (branch wgrad-tickets): GemmSchedule.* and GemmValidate.* of its
#     build, memcheck and racecheck on the ticket test;
#  2. the A/B: tk = branch wgrad-tickets with its default static deal (main's data-grad band of 32
#     plus the GEMM core's 56/224 register split), tk1 = the same build with --wgrad-tickets=1,
#     base = main (data-grad band 32, registers 40/232), old = c1c01a1 (band 8, 40/232): base − old
#     is the band, tk − base the register split, tk1 − tk the tickets; the layer tests, sanitizers
#     and golden run on tk (first tree; it holds main's band default too), two rounds on both
#     routings with the reference in each, torch after, the acceptance table of tk;
#  3. the weight-gradient launches' DRAM bytes on gpt-oss-120b zipf1 under tk1 (session 31: 3.3 +
#     6.8 GB read with the static deal against 0.9 + 1.9 balanced; L2 hit rate 75 % against 90 %).
# Before it, on the CPU machine (≈ 8 minutes):
#   ci/ab-rev-trees.sh .abbin tk=wgrad-tickets base=main old=c1c01a1
#   ci/ab-knob-trees.sh /tmp/detmoe-ab/tk/build .abbin tk 'tk1=--wgrad-tickets=1'
#   ninja -C /tmp/detmoe-ab/tk/build detmoe_gemm_test && mkdir -p .abbin/gemm &&
#     cp /tmp/detmoe-ab/tk/build/tests/megakernel/detmoe_gemm_test .abbin/gemm/ && strip .abbin/gemm/*
#   OUT=dir BUDGET_S=580 bash ci/device-session32.sh        (carry .devdeps .abbin)
source "$(dirname "$0")/device-call.sh"
use_prebuilt
out=$OUT
step "GEMM core schedule and validation tests (branch wgrad-tickets)"
timeout 90 .abbin/gemm/detmoe_gemm_test --gtest_filter='*GemmSchedule.*:GemmValidate.*' >"$out/gemm-tests.log" 2>&1
echo "gemm tests exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure' "$out/gemm-tests.log" | head -8
for tool in memcheck racecheck; do
  step "$tool on the ticket test"
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 .abbin/gemm/detmoe_gemm_test \
    --gtest_filter='*GemmSchedule.TicketDealDoesNotChangeBits/WeightGrad' >"$out/gemm-$tool.log" 2>&1
  echo "$tool exit $?"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/gemm-$tool.log" | head -3
done
OUT=$out/ab BUDGET_S=$(( $(left) - 60 )) AB_BIN=.abbin AB_NAMES='tk tk1 base old' AB_ROUNDS=2 AB_REF=round AB_TORCH=1 \
  AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=60 bash ci/device-ab-prebuilt.sh
# `detmoe verify` has no knob flags: ncu over the tk1 bench's first four weight-gradient launches
# (two steps' dW_down and dW_gate_up; caches flushed before each kernel, the GPU's own clocks).
step "ncu, weight-gradient launches with tickets, gpt-oss-120b zipf1 ($(left) s left)"
timeout $(( $(left) - 5 )) ncu --clock-control none --kernel-name regex:grouped_gemm --launch-count 4 \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct --csv --print-units base \
  --log-file "$out/kt-tk1-gpt-oss-zipf1.csv" \
  .abbin/tk1/detmoe_perf_layer --impls=megakernel --shapes=gpt-oss-120b --routings=zipf1 --timed=1 \
  >"$out/kt-tk1.log" 2>&1
echo "ncu exit $?"; python3 perf/kernel_times.py "$out/kt-tk1-gpt-oss-zipf1.csv" --runs 2 \
  --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct | head -12
step done
