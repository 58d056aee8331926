#!/usr/bin/env bash
# Session 16: the backward's dx tiles read their row tables from shared memory (as the forward's
# GEMM2). Trees .ab/bt (the change) and .ab/head (without it), built side by side: the backward's
# GPU tests on bt, its golden check, then one same-run A/B round of fwd+bwd on the four shapes.
#   OUT=dir bash ci/device-session16-bwd-table.sh     (carry .devdeps and .ab)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
AB_TREES='bt=.ab/bt head=.ab/head' AB_ROUNDS=0 \
  AB_TESTS='MegakernelBackward*:Small/MegakernelBackward*-*NamedShapes.MatchReference:*BackwardProperty.Random*' \
  AB_TARGETS='detmoe detmoe_perf_layer' OUT=$OUT/tests AB_WORK=/tmp/ab-tests bash perf/megakernel_ab.sh
( cd .ab/bt && source ci/device-env.sh && timeout 60 build-ab/detmoe golden check --impl megakernel 2>&1 | tail -1 ) | tee "$OUT/golden.txt"
AB_TREES='bt=.ab/bt head=.ab/head' AB_ROUNDS=1 AB_SHAPES=qwen3-30b-a3b,deepseek-v3,mixtral-8x7b,gpt-oss-120b \
  AB_TARGETS='detmoe_perf_layer' OUT=$OUT/bench AB_WORK=/tmp/ab-bench bash perf/megakernel_ab.sh
