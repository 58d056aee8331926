#!/usr/bin/env bash
# The GEMM core against cuBLAS per expert on one grouped GEMM, by ncu (the GPU's own clocks):
# duration, SM clock, DRAM and L2 traffic, instructions, for GEMM_NCU_CASE's /ours and
# /cublas_per_expert benchmarks of detmoe_perf_gemm (a few launches of each after warm-up).
# DRAM bytes read / written and the L2's read sectors from the SMs (and their misses) are counted
# too: session 35 found the core at cuBLAS's cycles but 1.5–1.8× its DRAM bytes (from the DRAM
# throughput percentage; these counters give the bytes themselves).
#   OUT=dir BUDGET_S=... [BIN=.abbin/auto] [GEMM_NCU_CASE='mixtral-8x7b_up_forward deepseek-v3_up_data_grad']
#     bash ci/device-gemm-ncu.sh
#   (BIN: a folder holding detmoe_perf_gemm; carry .devdeps and BIN's tree, libbenchmark in .abbin/lib)
# GEMM_NCU_IMPLS: the benchmarks' implementations (default 'ours cublas_per_expert'); GEMM_NCU_ARGS:
# arguments for detmoe_perf_gemm, e.g. '--bands=16' with GEMM_NCU_IMPLS='ours ours_band16
# cublas_per_expert' (branch gemm-band's binary).
source "$(dirname "$0")/device-call.sh"
bin=${BIN:-.abbin/auto}
# BIN is a folder (ci/device-kernel-times.sh's is a file): session 35 passed the binary's path and
# lost a call to ncu's "no CSV header" on both implementations.
[ -f "$bin/detmoe_perf_gemm" ] ||
  { echo "device-gemm-ncu.sh: no $bin/detmoe_perf_gemm (BIN must be the folder holding it)"; exit 2; }
use_prebuilt "$(dirname "$bin")"
counters=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum
for case in ${GEMM_NCU_CASE:-mixtral-8x7b_up_forward}; do
for impl in ${GEMM_NCU_IMPLS:-ours cublas_per_expert}; do
  [ "$(left)" -gt 40 ] || break
  step "ncu $case/$impl ($(left) s left)"
  # ours: one launch is the whole grouped GEMM; cuBLAS: one launch per expert (8 for mixtral).
  count=$([ "$impl" = cublas_per_expert ] && echo 8 || echo 2)
  timeout $(( $(left) - 20 )) ncu --clock-control none --launch-skip 24 --launch-count "$count" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section InstructionStats \
    --section Occupancy --metrics "$counters" --csv --page details "$bin/detmoe_perf_gemm" ${GEMM_NCU_ARGS:-} \
    --benchmark_filter="grouped/$case/$impl/" >"$OUT/ncu-$case-$impl.csv" 2>"$OUT/ncu-$case-$impl.err"
  echo "ncu exit $?"; tail -n 2 "$OUT/ncu-$case-$impl.err"
  (cd perf && python3 - "$OUT/ncu-$case-$impl.csv") <<'PY'
import sys
from kernel_times import ncu_rows
want = ["Duration", "SM Frequency", "DRAM Throughput", "Memory Throughput", "L2 Hit Rate", "L1/TEX Hit Rate",
        "Compute (SM) Throughput", "Executed Ipc Active", "Executed Instructions", "Registers Per Thread",
        "Grid Size", "Cluster Size", "Dynamic Shared Memory Per Block", "Achieved Occupancy",
        "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sectors_srcunit_tex_op_read.sum",
        "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum"]
rows = {}
for r in ncu_rows(sys.argv[1]):
    k = (r["ID"], r["Kernel Name"][:60])
    if r["Metric Name"] in want:
        rows.setdefault(k, {})[r["Metric Name"]] = f'{r["Metric Value"]} {r["Metric Unit"]}'
for (i, name), m in rows.items():
    print(f"#{i} {name}")
    print("   " + " | ".join(f"{w}: {m[w]}" for w in want if w in m))
PY
done
done
step done
