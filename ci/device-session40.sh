#!/usr/bin/env bash
# Session 40's call A (prediction in docs/PERF.md "Session 40"): branch lw = main + land's dx wave
# gate (86be912, 9f11712) + the weight-gradient launches' tile order and evict-first stores,
# prebuilt in .abbin2 (carry .devdeps .abbin2; ci/device-session40-trees.sh lays them out):
#   lw   = branch lw: detmoe, detmoe_perf_layer, detmoe_layer_test, detmoe_gemm_test, detmoe_perf_gemm;
#   lw0  = lw's build with --wgrad-band-kb=0 --wgrad-stream=0 (fixed bands, plain stores: land's
#          launches, the same binary);
#   main = main: detmoe, detmoe_perf_layer.
# 1. lw's GEMM-core tests (the order's and the stores' bits: budgets 1 KB … 1 GB, static and tickets);
# 2. ci/device-session38.sh over 'lw lw0 main': lw's megakernel GPU tests (the dx gate's engagement,
#    the weight-gradient order and store arms), racecheck + memcheck, golden, the torch pipeline
#    first, two alternated rounds with the reference in each. lw against lw0 is the weight-gradient
#    launches' change alone (one binary), lw0 against main the dx gate.
#   OUT=dir BUDGET_S=540 bash ci/device-session40.sh
# Cut for a short call: S38_TORCH=0 AB_SHAPES=mixtral-8x7b,deepseek-v3 (≈ 200 s after the start).
# S40_NAMES='lw lwr' (with AB_SHAPES=gpt-oss-120b,qwen3-30b-a3b): the deep store ring in the layer
# (LayerConfig::weight_grad_deep_ring, off in lw), once call B's GEMM times favour it.
source "$(dirname "$0")/device-call.sh"
use_prebuilt .abbin2
step "GEMM-core tests of lw ($(left) s left)"
gtest_run gemm-tests 60 .abbin2/lw/detmoe_gemm_test 'GemmSchedule*:GemmWeightGradOrder*:GemmBandOrder*:GemmValidate*'
OUT=$OUT/s38 BUDGET_S=$(( $(left) - 5 )) S38_NAMES="${S40_NAMES:-lw lw0 main}" bash ci/device-session38.sh
step done
