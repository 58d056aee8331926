#!/usr/bin/env bash
# The next call (docs/PERF.md sessions 29–31): each kernel's DRAM bytes on mixtral-8x7b zipf1
# (megakernel and reference), then
# main's standing on whatever GPU is lent (the issues' bars are the H200's; none was lent since
# session 22): the GPU tests, sanitizers and golden, two rounds with the reference in each, torch
# after, and perf/acceptance_verdict.py's table — with, beside it, tree bf16 (main with bf16 weight
# gradients, as the torch pipeline computes them: fwd+bwd torch / mk like for like, printed apart
# from the verdict; docs/PERF.md session 30, next item 2) — and trees b24 / b32, the forward's band
# height (docs/PERF.md session 31; their forward rows only: overlap_rows sets both directions).
# ci/device-session31-followup.sh (the forward traces, gpt-oss-120b's weight-gradient ncu) can follow it
# on the warm machine.
#   ci/ab-rev-trees.sh .abbin base=main
#   ci/ab-knob-trees.sh /tmp/detmoe-ab/base/build .abbin base 'bf16=--grad-dtype=bf16' 'b24=--knobs=0:3072' 'b32=--knobs=0:4096'
#   OUT=dir BUDGET_S=580 bash ci/device-session31.sh        (carry .devdeps .abbin; ≈ 10 minutes)
source "$(dirname "$0")/device-call.sh"
out=$OUT
# Each kernel's DRAM bytes on mixtral-8x7b zipf1, megakernel and reference: how many more bytes the
# fused launches move than cuBLAS per expert (session 27: the GEMM core's up-projection 8.8 GB against
# cuBLAS's 5.8; docs/PERF.md session 31). (gpt-oss-120b's weight-gradient ncu moved to
# device-session31-followup.sh.)
OUT=$out/kt BUDGET_S=100 BIN=.abbin/base KT_SHAPES=mixtral-8x7b KT_ROUTINGS=zipf1 KT_IMPLS='megakernel reference' \
  KT_METRICS=dram__bytes_read.sum,dram__bytes_write.sum bash ci/device-kernel-times.sh | grep -vE '^==PROF'
OUT=$out/ab BUDGET_S=$(( $(left) - 10 )) AB_BIN=.abbin AB_NAMES='base bf16 b24 b32' AB_BF16_TREE=bf16 AB_ROUNDS=2 AB_REF=round AB_TORCH=1 \
  AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=60 bash ci/device-ab-prebuilt.sh
step done
