#!/usr/bin/env bash
# Session 38's standing call: issues 18 and 19's bars for main + down-band + dx-gate (branch combo:
# the forward's GEMM2 in bands of 8, the backward's long-K dx tiles gated per wave), prebuilt on the
# CPU machine (carry .devdeps .abbin): .abbin/both = combo, .abbin/main = main. The first tree gets
# the megakernel GPU tests, racecheck + memcheck (P = 1 and 4 loopback) and the golden check; then
# alternating rounds of both, main and the reference per routing, the torch pipeline and
# perf/acceptance_verdict.py over the first tree.
#   OUT=dir BUDGET_S=540 bash ci/device-session38.sh
source "$(dirname "$0")/device-call.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
OUT=$OUT BUDGET_S=$(( $(left) - 5 )) AB_BIN=.abbin AB_NAMES="${S38_NAMES:-both main}" AB_ROUNDS=${S38_ROUNDS:-2} AB_REF=round AB_TORCH=1 \
  AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=60 bash ci/device-ab-prebuilt.sh
step done
