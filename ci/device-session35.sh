#!/usr/bin/env bash
# Session 35's first call (docs/PERF.md session 34, "Ready for the next call"), prebuilt on the CPU
# machine (carry .devdeps .abbin):
#   .abbin/pairs = branch dgrad-pairs's detmoe_gemm_test + detmoe_perf_gemm (the GEMM core's CTA
#                  pairs for the forward and data-grad layouts; never run on a GPU before);
#   .abbin/dc    = branch describe-cache2 (main + the ExpertWalker keeping the last expert's m-block
#                  span, plan rows and the rank's first row: the backward's consumers describe a
#                  tile of the same expert without an L2 load), the same three
#                  binaries (built with ninja, copied and stripped like ci/ab-knob-trees.sh does);
#   .abbin/main  = main's detmoe, detmoe_perf_layer, detmoe_layer_test (ci/ab-knob-trees.sh build .abbin main).
# 1. the pairs: their tests, memcheck + racecheck of the pair test, then lone / pairs / cuBLAS per
#    expert on deepseek-v3's and mixtral-8x7b's forward and data-grad GEMMs (prediction: mixtral dx
#    5.90 → 5.2–5.5 ms as pairs, deepseek dx level);
# 2. dc's megakernel GPU tests, sanitizers and golden (dc holds main's host code, which changed
#    after session 34's last test run), two rounds of dc, main and the reference per routing, the
#    torch pipeline (the standing of issues 18 and 19 on whatever card this is), dc's trace of
#    deepseek-v3 (prediction: the backward tiles' fixed cost, ≈ 6 µs per tile by session 34's
#    da/dx fit, down by ≈ 1 µs; deepseek-v3 backward −0.1 to −0.2 ms, the others level).
#   OUT=dir bash ci/device-session35.sh
source "$(dirname "$0")/device-call.sh"
out=$OUT
step "CTA pairs ($(left) s left)"
OUT=$out/pairs BUDGET_S=${S35_PAIRS_S:-170} PAIRS_NCU=0 PAIRS_BENCH_LIMIT=140 PAIRS_BIN=.abbin/pairs \
  PAIRS_FILTER='grouped/(mixtral-8x7b|deepseek-v3)_(up|down)_(forward|data_grad)/' bash ci/device-gemm-pairs.sh
step "dc and main: tests, sanitizers, golden, rounds ($(left) s left)"
OUT=$out/ab BUDGET_S=$(( $(left) - 5 )) AB_BIN=.abbin AB_NAMES='dc main' AB_ROUNDS=${S35_ROUNDS:-2} TRACE_SHAPES=deepseek-v3 AB_REF=round AB_TORCH=1 \
  AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=60 bash ci/device-ab-prebuilt.sh
step done
