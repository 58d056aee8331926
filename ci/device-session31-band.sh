#!/usr/bin/env bash
# The forward's band height under zipf1 (docs/PERF.md session 31): a hot mixtral-8x7b expert has
# ≈ 47 m-blocks, so at the default 16 m-blocks per band its weight panels are read from HBM three
# times; 24 or 32 read them twice (the A band, 24–32 MB, then competes with them for L2). Knob trees
# of main (overlap_rows sets both directions, so only the fwd rows of b24 / b32 are read):
#   ci/ab-knob-trees.sh /tmp/detmoe-ab/base/build .abbin base 'b24=--knobs=0:3072' 'b32=--knobs=0:4096'
#   OUT=dir BUDGET_S=300 bash ci/device-session31-band.sh        (carry .devdeps .abbin; ≈ 6 minutes)
source "$(dirname "$0")/device-call.sh"
out=$OUT
# gpt-oss-120b's weight-gradient launches by ncu on both routings, DRAM reads and writes and the L2
# hit rate (which reading of its zipf1 penalty holds; docs/PERF.md sessions 29–30).
OUT=$out/kt BUDGET_S=110 BIN=.abbin/base KT_SHAPES=gpt-oss-120b KT_ROUTINGS='balanced zipf1' KT_IMPLS=megakernel \
  KT_ARGS='--kernel-name regex:grouped_gemm' \
  KT_METRICS=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed \
  bash ci/device-kernel-times.sh | grep -vE '^==PROF'
OUT=$out/ab BUDGET_S=$(( $(left) - 5 )) AB_BIN=.abbin AB_NAMES='base b24 b32' AB_ROUNDS=2 AB_REF=round \
  AB_ROUTING=zipf1,balanced AB_SHAPES=deepseek-v3,mixtral-8x7b AB_SANITIZE=0 AB_TESTS='MegakernelD1.*' TESTS_LIMIT=30 \
  AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=20 AB_ROUND_SLACK=10 bash ci/device-ab-prebuilt.sh
step done
