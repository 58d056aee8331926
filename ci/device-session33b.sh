#!/usr/bin/env bash
# Session 33's second call (docs/PERF.md session 33): the weight-gradient launches' tile deal
# decided on the device (tickets only where the experts' rows are uneven: GroupedGemm::tile_tickets)
# after the first call measured tickets gaining under zipf1 and costing under balanced routing.
#   git checkout wgrad-tickets && ninja -C build detmoe detmoe_perf_layer detmoe_layer_test detmoe_gemm_test
#   ci/ab-knob-trees.sh build .abbin ad 'ad0=--wgrad-tickets=0'
#   mkdir -p .abbin/gemm && cp build/tests/megakernel/detmoe_gemm_test .abbin/gemm/ && strip .abbin/gemm/*
#   OUT=dir BUDGET_S=300 bash ci/device-session33b.sh        (carry .devdeps .abbin)
# 1. the GEMM core's schedule tests (the ticket test now checks the decision by the counter's end
#    value) and racecheck on it; 2. the backward's D1 and graph tests and golden on ad (the layer
#    sanitizers ran in the first call on the same fused kernel); 3. rounds of ad (rule) and ad0
#    (static deal) with the reference in each, both routings, no torch (the first call's).
source "$(dirname "$0")/device-call.sh"
use_prebuilt
out=$OUT
step "GEMM core schedule and validation tests"
timeout 60 .abbin/gemm/detmoe_gemm_test --gtest_filter='*GemmSchedule.*:GemmValidate.*' >"$out/gemm-tests.log" 2>&1
echo "gemm tests exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure|Expected|Which is' "$out/gemm-tests.log" | head -12
step "racecheck on the ticket test"
timeout 40 compute-sanitizer --tool racecheck --error-exitcode 9 .abbin/gemm/detmoe_gemm_test \
  --gtest_filter='*GemmSchedule.TicketDealDoesNotChangeBits/WeightGrad' >"$out/gemm-racecheck.log" 2>&1
echo "racecheck exit $?"; grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$out/gemm-racecheck.log" | head -3
OUT=$out/ab BUDGET_S=$(( $(left) - 5 )) AB_BIN=.abbin AB_NAMES="ad ad0" AB_ROUNDS=2 AB_REF=round AB_TORCH=0 \
  AB_TESTS='MegakernelBackwardD1*:MegakernelBackwardGraph*:MegakernelBackwardD0*' TESTS_LIMIT=60 AB_SANITIZE=0 \
  AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=40 AB_ROUND_SLACK=8 bash ci/device-ab-prebuilt.sh
step done
