#!/usr/bin/env bash
# Session 33's call (docs/PERF.md session 33), one machine, trees built on the CPU machine:
#   tk   = branch wgrad-tickets (main + the rolled dSwiGLU epilogue + the GEMM core's ticket deal,
#          on by default in the weight-gradient launches, so every test below runs it);
#   tk0  = tk's build run with --wgrad-tickets=0 (the static deal, as on main);
#   base = main.
#   git checkout wgrad-tickets && ninja -C build detmoe detmoe_perf_layer detmoe_layer_test detmoe_gemm_test
#   ci/ab-knob-trees.sh build .abbin tk 'tk0=--wgrad-tickets=0'
#   mkdir -p .abbin/gemm && cp build/tests/megakernel/detmoe_gemm_test .abbin/gemm/ && strip .abbin/gemm/*
#   ci/ab-rev-trees.sh .abbin base=main
#   OUT=dir BUDGET_S=560 bash ci/device-session33.sh        (carry .devdeps .abbin)
# 1. the GEMM core's schedule and validation tests, racecheck on the ticket test (memcheck: the
#    layer's, below, runs the ticket deal in its weight-gradient launches);
# 2. the A/B: tk first, so the layer tests (their backward D1 test runs the ticket deal too),
#    racecheck / memcheck at P = 1 and 4 and golden run on it; tk0 − base is the rolled epilogue
#    (and the GEMM core's 56 / 224 register split), tk − tk0 the ticket deal; two rounds per
#    routing with the reference in each, torch after;
# 3. the task timelines of tk and base on mixtral-8x7b balanced (the dSwiGLU epilogue per da tile).
source "$(dirname "$0")/device-call.sh"
use_prebuilt
out=$OUT
step "GEMM core schedule and validation tests"
timeout 90 .abbin/gemm/detmoe_gemm_test --gtest_filter='*GemmSchedule.*:GemmValidate.*' >"$out/gemm-tests.log" 2>&1
echo "gemm tests exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure' "$out/gemm-tests.log" | head -8
for tool in racecheck; do
  step "$tool on the ticket test"
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 .abbin/gemm/detmoe_gemm_test \
    --gtest_filter='*GemmSchedule.TicketDealDoesNotChangeBits/WeightGrad' >"$out/gemm-$tool.log" 2>&1
  echo "$tool exit $?"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/gemm-$tool.log" | head -3
done
OUT=$out/ab BUDGET_S=$(( $(left) - ${S33_TRACE_S:-60} )) AB_BIN=.abbin AB_NAMES="${S33_NAMES:-tk tk0 base}" AB_ROUNDS=2 \
  AB_REF=round AB_TORCH=${S33_TORCH:-1} AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 \
  AB_ROUND_MIN=${S33_ROUND_MIN:-60} bash ci/device-ab-prebuilt.sh
for tree in tk base; do
  [ "$(left)" -gt 25 ] || break
  step "trace, $tree, mixtral-8x7b balanced ($(left) s left)"
  timeout $(( $(left) < 30 ? $(left) - 3 : 30 )) .abbin/$tree/detmoe_perf_layer --impls=megakernel --routings=balanced \
    --shapes=mixtral-8x7b --timed=5 --trace >"$out/trace-$tree-mixtral.log" 2>&1
  echo "trace exit $?"; grep -iE 'epilogue|dgrad1|da ' "$out/trace-$tree-mixtral.log" | head -12
done
step done
