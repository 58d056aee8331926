#!/usr/bin/env bash
# Session 40's call B, the mechanism behind call A's rounds (trees as ci/device-session40.sh's):
# 1. ncu DRAM bytes and SM clock of the weight-gradient launches (the GEMM core's grouped_gemm
#    kernel: dW_down and dW_gate_up) of lw against main, mixtral-8x7b and deepseek-v3 balanced —
#    the prediction is perf/wgrad_order_dram.py's (docs/PERF.md "Session 40");
# 2. bits: every output of main and lw on one problem whose dx tiles the gate holds and whose
#    weight-gradient experts take both orders (F 8192: 256 k-blocks; 1,024 rows per expert), and
#    lw's own run at --wgrad-band-kb 0 is not needed (lw0 shares its binary: the order is a knob).
#   OUT=dir BUDGET_S=240 bash ci/device-session40b.sh
source "$(dirname "$0")/device-call.sh"
use_prebuilt .abbin2
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
for shape in mixtral-8x7b deepseek-v3; do
  for tree in main lw; do
    [ "$(left)" -gt 70 ] || break 2
    step "ncu weight-gradient launches, $tree $shape ($(left) s left)"
    OUT=$OUT/kt-$tree-$shape BUDGET_S=$(( $(left) < 75 ? $(left) - 5 : 70 )) BIN=.abbin2/$tree KT_SHAPES=$shape KT_IMPLS=megakernel \
      KT_ARGS='--kernel-name regex:grouped_gemm' \
      KT_METRICS=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__cycles_elapsed.avg.per_second \
      bash ci/device-kernel-times.sh
  done
done
step "bits: main against lw ($(left) s left)"
problem="--T 2048 --H 4096 --F 8192 --E 4 --k 2 --seed 7"
timeout 60 .abbin2/main/detmoe run $problem --write-inputs /tmp/in.safetensors >"$OUT/bits.log" 2>&1
for tree in main lw; do
  timeout 60 ".abbin2/$tree/detmoe" run --impl megakernel --inputs /tmp/in.safetensors --outputs "/tmp/out-$tree.safetensors" \
    >>"$OUT/bits.log" 2>&1; echo "$tree run exit $?"
done
cmp /tmp/out-main.safetensors /tmp/out-lw.safetensors && echo "bits: every output of lw equals main's ($(stat -c %s /tmp/out-main.safetensors) bytes)"
step done
