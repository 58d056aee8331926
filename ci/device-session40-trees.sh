#!/usr/bin/env bash
# The trees of ci/device-session40.sh and 40b.sh, on the CPU machine after ci/setup.sh (≈ 10 min on
# 2 cores with ccache): .abbin2/lw (branch lw's five binaries), .abbin2/lw0 and .abbin2/lwr
# (wrappers: lw's detmoe_perf_layer at fixed bands and plain stores, or with the deep store ring),
# .abbin2/main (main's detmoe and detmoe_perf_layer). Under the 64 MiB carry with .devdeps (26 MB).
# Branch lw is kept by main's record-only merge 6417646: in a new checkout, `git branch lw
# 6417646^2` first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/ab-rev-trees.sh .abbin2 lw=${LW_REV:-lw} main=${MAIN_REV:-main}
work=${AB_WORK:-/tmp/detmoe-ab}
ninja -C "$work/lw/build" detmoe_gemm_test detmoe_perf_gemm >/dev/null
cp "$work/lw/build/tests/megakernel/detmoe_gemm_test" "$work/lw/build/perf/detmoe_perf_gemm" .abbin2/lw/
strip .abbin2/lw/detmoe_gemm_test .abbin2/lw/detmoe_perf_gemm
bash ci/ab-knob-trees.sh "$work/lw/build" .abbin2 lw 'lw0=--wgrad-band-kb=0 --wgrad-stream=0' 'lwr=--wgrad-ring=1' >/dev/null
rm -f .abbin2/main/detmoe_layer_test  # only the first tree's tests run
du -sh .abbin2 .devdeps 2>/dev/null
