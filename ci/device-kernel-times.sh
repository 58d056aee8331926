#!/usr/bin/env bash
# What each kernel of a fwd+bwd step costs, the megakernel's and the reference's: ncu with the GPU's
# own clocks (`--clock-control none`, caches flushed before each kernel) and one metric, the kernel's
# duration, over `detmoe verify --no-oracle` (the step runs twice: the run and its rerun check).
# perf/kernel_times.py sums the durations by kernel, in launch order. Kernels run one at a time under
# ncu, so this is each kernel's own time, not the step's (no overlap, no launch gaps).
#   OUT=dir BUDGET_S=... [BIN=.abbin/base] [KT_SHAPES='mixtral-8x7b deepseek-v3'] [KT_IMPLS='megakernel reference']
#     [KT_ROUTINGS='balanced zipf1'] bash ci/device-kernel-times.sh
#   (carry .devdeps and BIN's tree; BIN holds detmoe)
# KT_METRICS adds ncu metrics to the duration (comma-separated; listed per launch by
# perf/kernel_times.py) and KT_ARGS other ncu arguments, e.g.
# the weight-gradient launches' memory traffic (docs/PERF.md session 29, next step):
#   KT_ARGS='--kernel-name regex:grouped_gemm' KT_METRICS=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
source "$(dirname "$0")/device-call.sh"
bin=${BIN:-.abbin/base}
use_prebuilt "$(dirname "$bin")"
for shape in ${KT_SHAPES:-mixtral-8x7b deepseek-v3}; do
  for routing in ${KT_ROUTINGS:-balanced}; do
    for impl in ${KT_IMPLS:-megakernel reference}; do
      [ "$(left)" -gt 40 ] || break 3
      step "ncu kernel times, $impl $shape $routing ($(left) s left)"
      f="$OUT/kt-$impl-$shape-$routing"
      timeout $(( $(left) - 20 )) ncu --clock-control none --metrics gpu__time_duration.sum${KT_METRICS:+,$KT_METRICS} --csv --print-units base \
        ${KT_ARGS:-} "$bin/detmoe" verify --impl "$impl" --shape "$shape" --routing "$routing" --no-oracle >"$f.csv" 2>"$f.err"
      echo "ncu exit $?"; tail -n 2 "$f.err"
      # All of it to a file (it comes back in the bundle); a pipe into head broke the listing.
      python3 perf/kernel_times.py "$f.csv" --runs 2 ${KT_METRICS:+--metrics "$KT_METRICS"} >"$f.txt"
      head -60 "$f.txt"
      # The call brings back 8 files at most: keep the CSVs compressed, in one bundle at the end.
      gzip -f "$f.csv"
    done
  done
done
step done
