#!/usr/bin/env bash
# The next call (docs/PERF.md session 35, "Next"): where the GEMMs' extra DRAM bytes and lower clock
# come from, with main's binaries prebuilt on the CPU machine (carry .devdeps .abbin):
#   ci/ab-knob-trees.sh build .abbin main && mkdir -p .abbin/gemm &&
#     cp build/perf/detmoe_perf_gemm .abbin/gemm/ && strip .abbin/gemm/*
# 1. the fused band knob (overlap_rows R: every band = R / 128 m-blocks; 0 = the defaults, forward
#    16, data-grad 32, weight-grad 8) on deepseek-v3 and mixtral-8x7b, fwd and fwd+bwd, time and
#    J per step, with the reference beside it — session 35's lockstep model says the band moves
#    ≈ 0.9 GB per GEMM between 8 and 16 m-blocks;
# 2. ncu per kernel (`ci/device-kernel-times.sh`): DRAM bytes read / written and the SM clock of
#    the fused launches against the reference's kernels (mixtral-8x7b, deepseek-v3, balanced) —
#    do the fused launches read more than cuBLAS's, as the GEMM core does (1.5–1.8×)?;
# 3. the GEMM core against cuBLAS on the four big GEMMs with DRAM bytes and the L2's read sectors
#    and misses as counters (`ci/device-gemm-ncu.sh`).
#   OUT=dir BUDGET_S=560 bash ci/device-session36.sh
source "$(dirname "$0")/device-call.sh"
use_prebuilt
out=$OUT
step "band knob, megakernel and reference ($(left) s left)"
timeout 200 .abbin/main/detmoe_perf_layer --impls=megakernel,reference --routings=balanced \
  --shapes=deepseek-v3,mixtral-8x7b --knobs=0:0,0:1024,0:2048,0:4096 --timed=20 --warmup-seconds=1 \
  --benchmark_out="$out/band-knob.json" --benchmark_out_format=json >"$out/band-knob.log" 2>&1
echo "exit $?"; python3 -c '
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    print(b["name"].split("/iterations")[0], "%.3f ms" % b["median_ms"], "%.2f J" % b.get("joules_per_step", 0))
' "$out/band-knob.json" 2>&1 | head -40
step "ncu per kernel, fused against reference ($(left) s left)"
OUT=$out/kt BUDGET_S=$(( $(left) - 130 )) BIN=.abbin/main/detmoe KT_SHAPES='mixtral-8x7b deepseek-v3' \
  KT_IMPLS='megakernel reference' KT_METRICS=dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second \
  bash ci/device-kernel-times.sh
step "ncu, GEMM core against cuBLAS with byte counters ($(left) s left)"
OUT=$out/gemm BUDGET_S=$(( $(left) - 5 )) BIN=.abbin/gemm \
  GEMM_NCU_CASE='mixtral-8x7b_up_data_grad deepseek-v3_up_data_grad mixtral-8x7b_up_forward deepseek-v3_up_forward' \
  bash ci/device-gemm-ncu.sh
step done
