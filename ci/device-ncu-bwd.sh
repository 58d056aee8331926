#!/usr/bin/env bash
# Session 22, after the gather call: where the backward's consumers wait (ncu's per-instruction
# warp-stall samples of deepseek-v3's fused backward, main's kernels), and what the fp32
# weight-gradient epilogue costs end to end (the same bench with bf16 weight gradients beside it).
#   OUT=dir BUDGET_S=... bash ci/device-ncu-bwd.sh   (carry .devdeps .abbin; .abbin/base = main)
source "$(dirname "$0")/device-call.sh"
source ci/device-env.sh
bin=.abbin/base
export LD_LIBRARY_PATH=$PWD/.abbin/lib:$LD_LIBRARY_PATH
chmod +x $bin/detmoe* 2>/dev/null
step "ncu source counters, deepseek-v3 backward ($(left) s left)"
timeout $(( $(left) > 200 ? 200 : $(left) - 20 )) ncu --section SourceCounters --section WarpStateStats \
  --kernel-name regex:layer_backward --launch-count 1 -f -o "$OUT/bwd" $bin/detmoe verify --impl megakernel \
  --shape deepseek-v3 --no-oracle >"$OUT/ncu.log" 2>&1
echo "ncu exit $?"; tail -3 "$OUT/ncu.log"
ncu -i "$OUT/bwd.ncu-rep" --page source --csv --print-source sass >"$OUT/sass.csv" 2>"$OUT/sass.err"
echo "source page exit $? ($(wc -l <"$OUT/sass.csv") lines)"; head -c 600 "$OUT/sass.err"
python3 perf/ncu_hotspots.py "$OUT/sass.csv" --top 40 --context 3 >"$OUT/stalls.txt"; head -120 "$OUT/stalls.txt"
gzip -f "$OUT/sass.csv"; rm -f "$OUT/bwd.ncu-rep"
for dt in bf16 fp32; do
  [ "$(left)" -gt 60 ] || break
  step "bench fwd_bwd grads $dt ($(left) s left)"
  timeout $(( $(left) - 15 )) $bin/detmoe_perf_layer --impls=megakernel,reference --routings=balanced \
    --shapes=deepseek-v3,gpt-oss-120b --timed=20 --warmup-seconds=1 --grad-dtype=$dt \
    --benchmark_out="$OUT/grads-$dt.json" --benchmark_out_format=json >"$OUT/grads-$dt.log" 2>&1
  echo "exit $?: $(python3 -c '
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    print(b["name"].split("/iterations")[0], "%.3f" % b["median_ms"], end="  |  ")
' "$OUT/grads-$dt.json" 2>&1)"
done
step done
