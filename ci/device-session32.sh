#!/usr/bin/env bash
# The next call (docs/PERF.md session 31, "Left for the next session"): main's default data-grad
# band of 32 m-blocks (3e777da) checked and timed against the kernels' previous default (a tree at
# c1c01a1, band 8): the GPU tests, sanitizers and golden on main first (the default itself has not
# run under the tests yet), three alternating rounds on both routings with the reference in each,
# torch after, the acceptance table; then the fused backward's DRAM bytes on mixtral-8x7b zipf1 for
# both trees (session 31: 11.65–12.14 GB read at band 8 against the reference's 9.54).
#   ci/ab-rev-trees.sh .abbin base=main old=c1c01a1
#   OUT=dir BUDGET_S=580 bash ci/device-session32.sh        (carry .devdeps .abbin; ≈ 10 minutes)
source "$(dirname "$0")/device-call.sh"
out=$OUT
OUT=$out/ab BUDGET_S=$(( $(left) - 110 )) AB_BIN=.abbin AB_NAMES='base old' AB_ROUNDS=3 AB_REF=round AB_TORCH=1 \
  AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=60 bash ci/device-ab-prebuilt.sh
for tree in base old; do
  OUT=$out/kt-$tree BUDGET_S=$(( $(left) / 2 )) BIN=.abbin/$tree KT_SHAPES=mixtral-8x7b KT_ROUTINGS=zipf1 KT_IMPLS=megakernel \
    KT_ARGS='--kernel-name regex:layer_backward' KT_METRICS=dram__bytes_read.sum,dram__bytes_write.sum \
    bash ci/device-kernel-times.sh | grep -vE '^==PROF'
done
step done
