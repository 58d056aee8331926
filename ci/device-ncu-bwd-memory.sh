#!/usr/bin/env bash
# Where the backward's weight-gradient mainloops wait (docs/PERF.md session 22, "what is known and
# untried"): ncu on one deepseek-v3 backward launch with the GPU's own clocks (--clock-control
# none: session 22's run under ncu's locked clocks showed larger full-barrier waits than the trace),
# with the memory sections (L2 hit rate, L2 and DRAM throughput) beside the source counters.
#   OUT=dir BUDGET_S=... DETMOE_BIN=<dir with detmoe> bash ci/device-ncu-bwd-memory.sh   (carry .devdeps and that dir)
source "$(dirname "$0")/device-call.sh"
source ci/device-env.sh
bin=${DETMOE_BIN:?a folder with a detmoe binary}
chmod +x "$bin"/detmoe 2>/dev/null
step "ncu, deepseek-v3 backward, own clocks ($(left) s left)"
timeout $(( $(left) - 20 )) ncu --clock-control none --section SourceCounters --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section SpeedOfLight --kernel-name regex:layer_backward --launch-count 1 \
  -f -o "$OUT/bwd" "$bin/detmoe" verify --impl megakernel --shape deepseek-v3 --no-oracle >"$OUT/ncu.log" 2>&1
echo "ncu exit $?"; tail -3 "$OUT/ncu.log"
ncu -i "$OUT/bwd.ncu-rep" --page details --csv >"$OUT/details.csv" 2>/dev/null
grep -E 'L2 Hit|DRAM Throughput|L2 Cache Throughput|Memory Throughput|Duration|SM Frequency' "$OUT/details.csv" | head -20
ncu -i "$OUT/bwd.ncu-rep" --page source --csv --print-source sass >"$OUT/sass.csv" 2>"$OUT/sass.err"
python3 perf/ncu_hotspots.py "$OUT/sass.csv" --top 12 --context 2 >"$OUT/stalls.txt"; head -60 "$OUT/stalls.txt"
gzip -f "$OUT/sass.csv"; rm -f "$OUT/bwd.ncu-rep"
step done
