#!/usr/bin/env bash
# Session 27: the front-back deal of the weight-gradient tiles (DETMOE_WGRAD_ORDER=front-back) — GEMM
# schedule tests + memcheck, the backward GPU tests under it, then an A/B of trees fb / base, zipf1 and balanced.
#   (carry .devdeps .abbin: base = the build, fb = a wrapper setting the variable; ci/ab-knob-trees.sh layout)
export OUT0=$OUT; source ci/device-env.sh; export LD_LIBRARY_PATH=$PWD/.abbin/lib:$LD_LIBRARY_PATH DETMOE_SOURCE_DIR=$PWD
chmod +x .abbin/*/detmoe*
echo "== gemm schedule tests"; timeout 60 .abbin/base/detmoe_gemm_test --gtest_filter='*GemmSchedule*' > $OUT0/gemm-tests.log 2>&1; echo "exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|differs' $OUT0/gemm-tests.log | head -8
echo "== memcheck front-back"; timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 .abbin/base/detmoe_gemm_test --gtest_filter='*GemmSchedule.FrontBack*' > $OUT0/gemm-memcheck.log 2>&1; echo "exit $?"; grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT0/gemm-memcheck.log | head -3
echo "== layer backward tests under front-back"; DETMOE_WGRAD_ORDER=front-back RC_PARAMS=max_success=15 timeout 60 .abbin/base/detmoe_layer_test --gtest_filter='MegakernelBackwardD1.*' > $OUT0/layer-tests.log 2>&1; echo "exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $OUT0/layer-tests.log | head -8
OUT=$OUT0/ab BUDGET_S=75 AB_SHAPES=gpt-oss-120b,deepseek-v3 AB_BIN=.abbin AB_NAMES='fb base' AB_ROUNDS=2 AB_ROUTING=zipf1 AB_SANITIZE=0 AB_TESTS='MegakernelBackwardD1.WeightGradLaunch*' TESTS_LIMIT=30 AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=12 AB_ROUND_SLACK=10 bash ci/device-ab-prebuilt.sh 2>&1
