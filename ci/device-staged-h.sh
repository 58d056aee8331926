#!/usr/bin/env bash
# The next call for session 28's two backward changes, built but never run on a GPU (docs/PERF.md
# session 28): branch `staged-h` (the dSwiGLU epilogue's first two h slices staged early) and
# `staged-dy1k` (that plus `dy-1k`, the dy dispatch's 1 KB bulk stores). The megakernel GPU tests,
# racecheck and memcheck at P = 1 and 4 and the golden check on the first tree (both changes),
# then the A/B of the three trees (both routings, the reference in every round, a trace of the first
# tree on mixtral-8x7b for the dSwiGLU epilogue per tile, torch after; dy-1k's
# effect is both − staged) and, if ≥ 90 s are left, gpt-oss-120b's kernel times on both routings
# (PERF session 27, item 2; otherwise as a follow-up on the warm machine:
#   OUT=$OUT/kt BUDGET_S=150 BIN=.abbin/both KT_SHAPES=gpt-oss-120b KT_ROUTINGS='balanced zipf1'
#   KT_IMPLS=megakernel bash ci/device-kernel-times.sh).
#   ci/ab-rev-trees.sh .abbin both=staged-dy1k staged=staged-h base=main
#   (where the branch refs are gone: both=2b177a0 staged=a47d692, recorded in main's history by e63014c)
#   OUT=dir BUDGET_S=580 bash ci/device-staged-h.sh        (carry .devdeps .abbin; ≈ 10 minutes)
source "$(dirname "$0")/device-call.sh"
out=$OUT
names=${AB_NAMES:-both staged base}
OUT=$out/ab BUDGET_S=$(( $(left) - 20 )) AB_BIN=.abbin AB_NAMES="$names" AB_ROUNDS=2 AB_REF=round AB_TORCH=1 \
  AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=60 TRACE_SHAPES=${TRACE_SHAPES:-mixtral-8x7b} \
  bash ci/device-ab-prebuilt.sh
if [ "$(left)" -gt 90 ]; then
  OUT=$out/kt BUDGET_S=$(( $(left) - 10 )) BIN=.abbin/${names%% *} KT_SHAPES=gpt-oss-120b KT_ROUTINGS='balanced zipf1' \
    KT_IMPLS=megakernel bash ci/device-kernel-times.sh | grep -vE '^==PROF'
fi
step done
