#!/usr/bin/env bash
# Session 38's call: the ready fused-kernel changes against main on every shape and both
# routings, with issues 18 and 19's bars — prebuilt on the CPU machine in .abbin2 (carry .devdeps
# .abbin2; under 64 MiB because only the first tree carries the test binaries):
#   fg   = branch fwd-gate: combo + the forward's GEMM1 tiles of ≥ 96 k-blocks gated per wave (one
#          WaveGate for both launches) — detmoe, detmoe_layer_test, detmoe_perf_layer: its megakernel
#          GPU tests, racecheck + memcheck (P = 1 and 4 loopback), golden;
#   both = branch combo: main + down-band (the forward's GEMM2 in bands of 8 m-blocks) + dx-gate (the
#          backward's dx tiles of ≥ 256 k-blocks gated per wave), detmoe_perf_layer;
#   main = main, detmoe_perf_layer (+ detmoe).
# both against main splits by pass (down-band changes only the forward, dx-gate only the
# backward); fg against both is the forward gate. Two rounds, the trees' order reversed in the
# second (AB_ALTERNATE), the reference in each round; the torch pipeline first (AB_TORCH=first:
# the rounds may run out of time); perf/acceptance_verdict.py over fg (others: offline, --tree).
#   OUT=dir BUDGET_S=520 bash ci/device-session38.sh
# Cuts for a short budget: S38_NAMES, S38_ROUNDS, S38_TORCH=0, S38_ROUND_MIN, S38_ROUND_SLACK, AB_SHAPES, AB_TESTS (device-ab-prebuilt.sh).
# Other trees: S38_NAMES names any trees in .abbin2, the first with the test binaries (session 39's
# landing check: S38_NAMES='land main', .abbin2/land = branch land's detmoe, detmoe_layer_test and
# detmoe_perf_layer; docs/PERF.md "Session 39, end").
source "$(dirname "$0")/device-call.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
OUT=$OUT/ab BUDGET_S=$(( $(left) - 5 )) AB_BIN=.abbin2 AB_NAMES="${S38_NAMES:-fg both main}" AB_ROUNDS=${S38_ROUNDS:-2} \
  AB_ALTERNATE=1 AB_REF=round AB_TORCH=${S38_TORCH:-first} AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=${S38_ROUND_MIN:-50} \
  AB_ROUND_SLACK=${S38_ROUND_SLACK:-30} bash ci/device-ab-prebuilt.sh
step done
