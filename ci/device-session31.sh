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
OUT=$out/kt BUDGET_S=120 BIN=.abbin/base KT_SHAPES=gpt-oss-120b KT_ROUTINGS='balanced zipf1' KT_IMPLS=megakernel \
  KT_ARGS='--kernel-name regex:grouped_gemm' \
  KT_METRICS=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed \
  bash ci/device-kernel-times.sh | grep -vE '^==PROF'
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
