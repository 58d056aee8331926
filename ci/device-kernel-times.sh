#!/usr/bin/env bash
# What each kernel of a fwd+bwd step costs, the megakernel's and the reference's: ncu with the GPU's
# own clocks (`--clock-control none`, caches flushed before each kernel) and one metric, the kernel's
# duration, over `detmoe verify --no-oracle` (the step runs twice: the run and its rerun check).
# perf/kernel_times.py sums the durations by kernel, in launch order. Kernels run one at a time under
# ncu, so this is each kernel's own time, not the step's (no overlap, no launch gaps).
#   OUT=dir BUDGET_S=... [BIN=.abbin/base] [KT_SHAPES='mixtral-8x7b deepseek-v3'] bash ci/device-kernel-times.sh
#   (carry .devdeps and BIN's tree; BIN holds detmoe)
source "$(dirname "$0")/device-call.sh"
source ci/device-env.sh
bin=${BIN:-.abbin/base}
export LD_LIBRARY_PATH=$PWD/.abbin/lib:$LD_LIBRARY_PATH
export DETMOE_SOURCE_DIR=$PWD
chmod +x "$bin"/detmoe* 2>/dev/null
for shape in ${KT_SHAPES:-mixtral-8x7b deepseek-v3}; do
  for impl in megakernel reference; do
    [ "$(left)" -gt 40 ] || break 2
    step "ncu kernel times, $impl $shape ($(left) s left)"
    timeout $(( $(left) - 20 )) ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
      ${KT_ARGS:-} "$bin/detmoe" verify --impl "$impl" --shape "$shape" --no-oracle >"$OUT/kt-$impl-$shape.csv" 2>"$OUT/kt-$impl-$shape.err"
    echo "ncu exit $?"; tail -n 2 "$OUT/kt-$impl-$shape.err"
    python3 perf/kernel_times.py "$OUT/kt-$impl-$shape.csv" --runs 2 | head -40
  done
done
step done
