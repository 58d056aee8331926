#!/usr/bin/env bash
# Session 15's ninth device call: does the GEMM core (no clusters, no multicast) spend more energy
# and L2 traffic than cuBLAS (2-CTA clusters with TMA multicast) for the same dense GEMM? The
# deepseek forward's ncu (call 1) showed the megakernel moving 1.8× the reference's L2 bytes.
#   OUT=dir bash ci/device-session15-energy.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
build_device detmoe_perf_gemm
G=build-device/perf/detmoe_perf_gemm
for round in 1 2; do
  timeout 150 $G --benchmark_filter='gemm/dense/(forward|data_grad)_8192' --benchmark_out="$OUT/dense-$round.json" \
    --benchmark_out_format=json >"$OUT/dense-$round.log" 2>&1; echo "round $round exit $?"
  python3 - "$OUT/dense-$round.json" <<'PY'
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    print(f'{b["name"].split("/iterations")[0]:40s} median {b.get("median_ms",0):7.3f} ms  {b.get("tflops",0):6.1f} TFLOP/s  '
          f'J/launch {b.get("joules_per_launch",0):6.3f}  W {b.get("avg_watts",0):5.0f}')
PY
done
for impl in ours cublas; do
  timeout 120 ncu --launch-skip 5 --launch-count 1 --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,l1tex__m_xbar2l1tex_read_bytes.sum,sm__inst_executed.sum,sm__cycles_elapsed.avg.per_second \
    --csv $G --benchmark_filter="gemm/dense/forward_8192/$impl" >"$OUT/ncu-$impl.csv" 2>/dev/null; echo "ncu $impl exit $?"
  grep '^"' "$OUT/ncu-$impl.csv" | python3 -c '
import csv, sys
rows = list(csv.reader(sys.stdin)); h = {k: i for i, k in enumerate(rows[0])}
for r in rows[1:]: print("   ", r[h["Kernel Name"]][:50], r[h["Metric Name"]], r[h["Metric Value"]], r[h["Metric Unit"]])'
done
