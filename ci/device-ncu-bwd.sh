#!/usr/bin/env bash
# Where the fused backward's warps wait: ncu's per-instruction warp-stall samples of one
# backward launch (NCU_SHAPE, default deepseek-v3), then (GRADS_PROBE=1, the default) what the fp32 weight gradients
# cost end to end (the same bench with bf16 weight gradients beside it, megakernel and reference).
#   OUT=dir BUDGET_S=... [BIN=.abbin/base] [NCU_ARGS=...] [NCU_SHAPE=deepseek-v3] [GRADS_PROBE=0] bash ci/device-ncu-bwd.sh
#   (carry .devdeps and BIN's tree, with libbenchmark in .abbin/lib; BIN holds detmoe and detmoe_perf_layer)
# Session 22 ran it as is (ncu's locked clocks). Next planned: NCU_ARGS='--clock-control none
# --section MemoryWorkloadAnalysis --section SpeedOfLight' GRADS_PROBE=0 (the GPU's own clocks,
# L2 hit rate and throughput in the weight-gradient phase; docs/PERF.md session 22).
source "$(dirname "$0")/device-call.sh"
bin=${BIN:-.abbin/base}
use_prebuilt "$(dirname "$bin")"
shape=${NCU_SHAPE:-deepseek-v3}
step "ncu source counters, $shape backward ($(left) s left)"
timeout $(( $(left) > 200 ? 200 : $(left) - 20 )) ncu ${NCU_ARGS:-} --section SourceCounters --section WarpStateStats \
  --kernel-name regex:layer_backward --launch-count 1 -f -o "$OUT/bwd" "$bin/detmoe" verify --impl megakernel \
  --shape "$shape" --no-oracle >"$OUT/ncu.log" 2>&1
echo "ncu exit $?"; tail -3 "$OUT/ncu.log"
ncu -i "$OUT/bwd.ncu-rep" --page details --csv >"$OUT/details.csv" 2>/dev/null
grep -E 'L2 Hit|DRAM Throughput|L2 Cache Throughput|Memory Throughput|Duration|SM Frequency' "$OUT/details.csv" | head -20
ncu -i "$OUT/bwd.ncu-rep" --page source --csv --print-source sass >"$OUT/sass.csv" 2>"$OUT/sass.err"
echo "source page exit $? ($(wc -l <"$OUT/sass.csv") lines)"; head -c 600 "$OUT/sass.err"
python3 perf/ncu_hotspots.py "$OUT/sass.csv" --top 40 --context 3 >"$OUT/stalls.txt"; head -120 "$OUT/stalls.txt"
gzip -f "$OUT/sass.csv"; rm -f "$OUT/bwd.ncu-rep"
for dt in $([ "${GRADS_PROBE:-1}" = 0 ] || echo bf16 fp32); do
  [ "$(left)" -gt 60 ] || break
  step "bench fwd_bwd grads $dt ($(left) s left)"
  timeout $(( $(left) - 15 )) "$bin/detmoe_perf_layer" --impls=megakernel,reference --routings=balanced \
    --shapes=deepseek-v3,gpt-oss-120b --timed=20 --warmup-seconds=1 --grad-dtype=$dt \
    --benchmark_out="$OUT/grads-$dt.json" --benchmark_out_format=json >"$OUT/grads-$dt.log" 2>&1
  echo "exit $?: $(python3 -c '
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    print(b["name"].split("/iterations")[0], "%.3f" % b["median_ms"], end="  |  ")
' "$OUT/grads-$dt.json" 2>&1)"
done
step done
