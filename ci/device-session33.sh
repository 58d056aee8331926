#!/usr/bin/env bash
# Session 33's first call (docs/PERF.md session 33): the rolled dSwiGLU epilogue (branch
# dswiglu-rolled, tree roll) against main (tree base), both built on the CPU machine with
#   ci/ab-rev-trees.sh .abbin roll=dswiglu-rolled base=main
# roll first, so the layer tests, racecheck / memcheck at P = 1 and 4 and golden run on it (they
# also cover main's data-grad band default, not GPU-tested since 3e777da); two rounds per routing
# with the reference in each, torch after; then the task timelines of both trees on mixtral-8x7b.
#   OUT=dir BUDGET_S=560 bash ci/device-session33.sh        (carry .devdeps .abbin)
source "$(dirname "$0")/device-call.sh"
use_prebuilt
out=$OUT
OUT=$out/ab BUDGET_S=$(( $(left) - ${S33_TRACE_S:-70} )) AB_BIN=.abbin AB_NAMES="${S33_NAMES:-roll base}" AB_ROUNDS=2 \
  AB_REF=round AB_TORCH=${S33_TORCH:-1} AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 \
  AB_ROUND_MIN=${S33_ROUND_MIN:-60} bash ci/device-ab-prebuilt.sh
for tree in ${S33_NAMES:-roll base}; do
  [ "$(left)" -gt 30 ] || break
  step "trace, $tree, mixtral-8x7b balanced ($(left) s left)"
  timeout $(( $(left) < 35 ? $(left) - 3 : 35 )) .abbin/$tree/detmoe_perf_layer --impls=megakernel --routings=balanced \
    --shapes=mixtral-8x7b --timed=5 --trace >"$out/trace-$tree-mixtral.log" 2>&1
  echo "trace exit $?"; grep -E 'epilogue|mainloop|da|dswiglu|backward' "$out/trace-$tree-mixtral.log" | head -30
done
step done
