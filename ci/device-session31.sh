#!/usr/bin/env bash
# The next call (docs/PERF.md sessions 29 and 30, "Next"; written in session 29 as device-session30.sh,
# renamed when session 30 ran its consumer-lead A/B under that name on branch fused-lead): first gpt-oss-120b's weight-gradient launches by
# ncu on both routings with DRAM reads and writes and the L2 hit rate (which of the two readings of
# its zipf1 penalty holds), then main's standing on whatever GPU is lent (the issues' bars are the
# H200's; none was lent since session 22): the GPU tests, sanitizers and golden, two rounds with the
# reference in each, torch after, and perf/acceptance_verdict.py's table — with, beside it, tree bf16
# (main with bf16 weight gradients, as the torch pipeline computes them: fwd+bwd torch / mk like for
# like, printed apart from the verdict; docs/PERF.md session 30, next item 2).
#   ci/ab-rev-trees.sh .abbin base=main
#   ci/ab-knob-trees.sh /tmp/detmoe-ab/base/build .abbin base 'bf16=--grad-dtype=bf16'
#   OUT=dir BUDGET_S=580 bash ci/device-session31.sh        (carry .devdeps .abbin; ≈ 10 minutes)
source "$(dirname "$0")/device-call.sh"
out=$OUT
OUT=$out/kt BUDGET_S=150 BIN=.abbin/base KT_SHAPES=gpt-oss-120b KT_ROUTINGS='balanced zipf1' KT_IMPLS=megakernel \
  KT_ARGS='--kernel-name regex:grouped_gemm' \
  KT_METRICS=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed \
  bash ci/device-kernel-times.sh | grep -vE '^==PROF'
OUT=$out/ab BUDGET_S=$(( $(left) - 10 )) AB_BIN=.abbin AB_NAMES='base bf16' AB_BF16_TREE=bf16 AB_ROUNDS=2 AB_REF=round AB_TORCH=1 \
  AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=60 bash ci/device-ab-prebuilt.sh
step done
