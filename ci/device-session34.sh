#!/usr/bin/env bash
# The next call (docs/PERF.md session 33, "Ready for the next call"), one machine, trees built on
# the CPU machine from branch next-call (kept in main's history by a record-only merge; recreate it
# with `git branch next-call <its sha from git log --all --oneline | grep 'Trace: each task'>`):
#   nx   = next-call: main + the device-decided tile deal (tickets only where the experts' rows are
#          uneven, c990db7) + each task's SM cycles in the trace (a clock per phase);
#   nx0  = nx's build with --wgrad-tickets=0 (the static deal);
#   main = main (tickets always on in the weight-gradient launches).
#   git checkout next-call && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release &&
#     ninja -C build detmoe detmoe_perf_layer detmoe_layer_test detmoe_gemm_test
#   ci/ab-knob-trees.sh build .abbin nx 'nx0=--wgrad-tickets=0'
#   mkdir -p .abbin/gemm && cp build/tests/megakernel/detmoe_gemm_test .abbin/gemm/ && strip .abbin/gemm/*
#   ci/ab-rev-trees.sh .abbin main=main
#   OUT=dir BUDGET_S=560 bash ci/device-session34.sh        (carry .devdeps .abbin)
# 1. GEMM schedule tests (the ticket test checks the decision by the counter's end value) and
#    racecheck on the ticket test;
# 2. the A/B: nx first, so the layer tests (MegakernelTrace checks every task's cycles and every
#    phase's clock), racecheck / memcheck at P = 1 and 4 and golden run on it; nx − main on the
#    balanced shapes is the static deal back (mixtral-8x7b −0.3 ms predicted), nx − nx0 under zipf1
#    the tickets (gpt-oss-120b −1.4 ms); two rounds per routing with the reference, torch after;
# 3. nx's task timeline on mixtral-8x7b balanced with each phase's clock: was session 33's 8.5 %
#    slower dx phase (379 against 349 µs per tile, same launch-average clock) a clock or a wait?
source "$(dirname "$0")/device-call.sh"
use_prebuilt
out=$OUT
step "GEMM core schedule and validation tests"
timeout 60 .abbin/gemm/detmoe_gemm_test --gtest_filter='*GemmSchedule.*:GemmValidate.*' >"$out/gemm-tests.log" 2>&1
echo "gemm tests exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure|Expected|Which is' "$out/gemm-tests.log" | head -12
step "racecheck on the ticket test"
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 .abbin/gemm/detmoe_gemm_test \
  --gtest_filter='*GemmSchedule.TicketDealDoesNotChangeBits/WeightGrad' >"$out/gemm-racecheck.log" 2>&1
echo "racecheck exit $?"; grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$out/gemm-racecheck.log" | head -3
OUT=$out/ab BUDGET_S=$(( $(left) - ${S34_TRACE_S:-45} )) AB_BIN=.abbin AB_NAMES="${S34_NAMES:-nx nx0 main}" AB_ROUNDS=2 \
  AB_REF=round AB_TORCH=${S34_TORCH:-1} AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 \
  AB_ROUND_MIN=${S34_ROUND_MIN:-60} bash ci/device-ab-prebuilt.sh
[ "$(left)" -gt 25 ] && {
  step "trace, nx, mixtral-8x7b balanced ($(left) s left)"
  timeout $(( $(left) - 5 )) .abbin/nx/detmoe_perf_layer --impls=megakernel --routings=balanced --shapes=mixtral-8x7b \
    --timed=5 --trace >"$out/trace-nx-mixtral.log" 2>&1
  echo "trace exit $?"; grep -E 'task timeline|kind|bwd|GEMM' "$out/trace-nx-mixtral.log" | head -24
}
step done
