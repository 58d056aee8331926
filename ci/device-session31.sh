#!/usr/bin/env bash
# The next call (docs/PERF.md sessions 29–31): each kernel's DRAM bytes on mixtral-8x7b zipf1
# (megakernel and reference) and the megakernel forward's task timeline on both routings, then
# main's standing on whatever GPU is lent (the issues' bars are the H200's; none was lent since
# session 22): the GPU tests, sanitizers and golden, two rounds with the reference in each, torch
# after, and perf/acceptance_verdict.py's table — with, beside it, tree bf16 (main with bf16 weight
# gradients, as the torch pipeline computes them: fwd+bwd torch / mk like for like, printed apart
# from the verdict; docs/PERF.md session 30, next item 2). Chain ci/device-session31-band.sh after it
# on the warm machine.
#   ci/ab-rev-trees.sh .abbin base=main
#   ci/ab-knob-trees.sh /tmp/detmoe-ab/base/build .abbin base 'bf16=--grad-dtype=bf16'
#   OUT=dir BUDGET_S=580 bash ci/device-session31.sh        (carry .devdeps .abbin; ≈ 10 minutes)
source "$(dirname "$0")/device-call.sh"
out=$OUT
# Each kernel's DRAM bytes on mixtral-8x7b zipf1, megakernel and reference: how many more bytes the
# fused launches move than cuBLAS per expert (session 27: the GEMM core's up-projection 8.8 GB against
# cuBLAS's 5.8; docs/PERF.md session 31). (gpt-oss-120b's weight-gradient ncu moved to
# device-session31-band.sh.)
OUT=$out/kt BUDGET_S=110 BIN=.abbin/base KT_SHAPES=mixtral-8x7b KT_ROUTINGS=zipf1 KT_IMPLS='megakernel reference' \
  KT_METRICS=dram__bytes_read.sum,dram__bytes_write.sum bash ci/device-kernel-times.sh | grep -vE '^==PROF'
# mixtral-8x7b's forward trails the reference most under zipf1 (0.956 against 0.985 balanced, session
# 30): its task timeline on both routings, per CTA (where the zipf1 time goes: GEMM1, GEMM2, tail).
source ci/device-env.sh
export LD_LIBRARY_PATH=$PWD/.abbin/lib:$LD_LIBRARY_PATH
chmod +x .abbin/*/detmoe* 2>/dev/null
for routing in balanced zipf1; do
  step "trace, mixtral-8x7b $routing ($(left) s left)"
  timeout 60 .abbin/base/detmoe_perf_layer --impls=megakernel --routings="$routing" --shapes=mixtral-8x7b --timed=5 \
    --trace >"$out/trace-mixtral-$routing.log" 2>&1
  echo "trace exit $?"; grep -vE '^(Run on|CPU Caches|  L[123]|Load Average|-----)' "$out/trace-mixtral-$routing.log" | head -40
done
OUT=$out/ab BUDGET_S=$(( $(left) - 10 )) AB_BIN=.abbin AB_NAMES='base bf16' AB_BF16_TREE=bf16 AB_ROUNDS=2 AB_REF=round AB_TORCH=1 \
  AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=60 bash ci/device-ab-prebuilt.sh
step done
