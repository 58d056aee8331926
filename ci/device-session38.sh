#!/usr/bin/env bash
# Session 38's call: the two ready fused-kernel changes, apart and together, against main on every
# shape and both routings, with issues 18 and 19's bars — prebuilt on the CPU machine in .abbin2
# (carry .devdeps .abbin2; under 64 MiB because only the first tree carries the test binaries):
#   both = branch combo (main + down-band fb351ef + dx-gate 5a8e166/332510d): detmoe, detmoe_layer_test,
#          detmoe_perf_layer — its megakernel GPU tests, racecheck + memcheck (P = 1 and 4 loopback),
#          golden;
#   d8   = down-band (the forward's GEMM2 in bands of 8 m-blocks), detmoe_perf_layer only;
#   dxg  = dx-gate (the backward's dx tiles of ≥ 256 k-blocks gated per wave), detmoe_perf_layer only;
#   main = main, detmoe_perf_layer (+ detmoe).
# Two rounds, the trees' order reversed in the second (AB_ALTERNATE), the reference in each round,
# the torch pipeline first (AB_TORCH=first: the rounds may run out of time), perf/acceptance_verdict.py over `both` (other trees: run it offline
# with --tree NAME on the results).
#   OUT=dir BUDGET_S=570 bash ci/device-session38.sh
source "$(dirname "$0")/device-call.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
OUT=$OUT/ab BUDGET_S=$(( $(left) - 5 )) AB_BIN=.abbin2 AB_NAMES="${S38_NAMES:-both d8 dxg main}" AB_ROUNDS=${S38_ROUNDS:-2} \
  AB_ALTERNATE=1 AB_REF=round AB_TORCH=first AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=50 \
  AB_ROUND_SLACK=30 bash ci/device-ab-prebuilt.sh
step done
