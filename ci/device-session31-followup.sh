#!/usr/bin/env bash
# The follow-up to ci/device-session31.sh on the warm machine (docs/PERF.md session 31):
# gpt-oss-120b's weight-gradient launches by ncu (DRAM bytes, L2 hit rate) on both routings, then the
# megakernel forward's task timeline on mixtral-8x7b, balanced and zipf1.
#   OUT=dir BUDGET_S=240 bash ci/device-session31-followup.sh        (carry .devdeps .abbin)
source "$(dirname "$0")/device-call.sh"
out=$OUT
# gpt-oss-120b's weight-gradient launches by ncu on both routings, DRAM reads and writes and the L2
# hit rate (which reading of its zipf1 penalty holds; docs/PERF.md sessions 29–30).
OUT=$out/kt BUDGET_S=110 BIN=.abbin/base KT_SHAPES=gpt-oss-120b KT_ROUTINGS='balanced zipf1' KT_IMPLS=megakernel \
  KT_ARGS='--kernel-name regex:grouped_gemm' \
  KT_METRICS=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed \
  bash ci/device-kernel-times.sh | grep -vE '^==PROF'
use_prebuilt
# mixtral-8x7b's forward trails the reference most under zipf1 (0.956 against 0.985 balanced, session
# 30): its task timeline on both routings, per CTA (where the zipf1 time goes: GEMM1, GEMM2, tail).
for routing in balanced zipf1; do
  step "trace, mixtral-8x7b $routing ($(left) s left)"
  timeout 60 .abbin/base/detmoe_perf_layer --impls=megakernel --routings="$routing" --shapes=mixtral-8x7b --timed=5 \
    --trace >"$out/trace-mixtral-$routing.log" 2>&1
  echo "trace exit $?"; grep -vE '^(Run on|CPU Caches|  L[123]|Load Average|-----)' "$out/trace-mixtral-$routing.log" | head -40
done
step done
