#!/usr/bin/env bash
# The next call (docs/PERF.md session 35, "Next"): where the GEMMs' extra DRAM bytes and lower clock
# come from. Binaries prebuilt on the CPU machine (carry .devdeps .abbin):
#   ci/ab-knob-trees.sh build .abbin main                       (main's detmoe, perf_layer, layer tests)
#   git worktree add ../band gemm-band && cmake -S ../band -B ../band/build -G Ninja -DCMAKE_BUILD_TYPE=Release &&
#     ninja -C ../band/build detmoe_gemm_test detmoe_perf_gemm && mkdir -p .abbin/gemm &&
#     cp ../band/build/tests/megakernel/detmoe_gemm_test ../band/build/perf/detmoe_perf_gemm .abbin/gemm/ &&
#     strip .abbin/gemm/*                                        (branch gemm-band: the core's band as a parameter)
# 1. gemm-band's schedule and validation tests (BandDoesNotChangeBits: bands 1, 3, 16, 64);
# 2. the core's band and L2 hints (gemm-band 2609ba3: --l2=keep_a,keep_b, evict_last on one operand's
#    TMA loads, evict_first on the other's): lone CTAs at the default band of 8 against 16 and cuBLAS per expert,
#    time and J per launch, on the forward and data-grad GEMMs of deepseek-v3 and mixtral-8x7b
#    (prediction from the lockstep model, perf/tile_order_dram.py: band 16 −0.9 GB per GEMM, a higher
#    clock and −2 to −5 % time where the core trails cuBLAS), then ncu with byte counters on two
#    of them, band 8 / band 16 / cuBLAS;
# 3. the fused band knob (overlap_rows R: every band = R / 128 m-blocks; 0 = the defaults, forward
#    16, data-grad 32, weight-grad 8) on deepseek-v3 and mixtral-8x7b, fwd and fwd+bwd, time and
#    J per step, the reference beside it;
# 4. ncu per kernel (ci/device-kernel-times.sh): DRAM bytes and SM clock of the fused launches
#    against the reference's kernels — do the fused launches read more than cuBLAS's too?
#   OUT=dir BUDGET_S=560 bash ci/device-session36.sh
source "$(dirname "$0")/device-call.sh"
use_prebuilt
out=$OUT
step "gemm-band tests ($(left) s left)"
gtest_run gemm-tests 90 .abbin/gemm/detmoe_gemm_test '*GemmSchedule.*:GemmValidate.*'
step "the core's band, time and energy ($(left) s left)"
timeout 150 .abbin/gemm/detmoe_perf_gemm --bands=16 --l2=keep_a,keep_b \
  --benchmark_filter='grouped/(mixtral-8x7b|deepseek-v3)_up_(forward|data_grad)/' \
  --benchmark_out="$out/gemm-bands.json" --benchmark_out_format=json >"$out/gemm-bands.log" 2>&1
echo "exit $?"; python3 perf/bench_medians.py "$out/gemm-bands.json" --strip gemm/grouped/ 2>&1 | head -40
step "ncu: band 8 / band 16 / cuBLAS with byte counters ($(left) s left)"
OUT=$out/gemm-ncu BUDGET_S=130 BIN=.abbin/gemm GEMM_NCU_IMPLS='ours ours_band16 ours_keep_a cublas_per_expert' GEMM_NCU_ARGS='--bands=16 --l2=keep_a' \
  GEMM_NCU_CASE='mixtral-8x7b_up_data_grad deepseek-v3_up_forward' bash ci/device-gemm-ncu.sh
step "fused band knob, megakernel and reference ($(left) s left)"
timeout 150 .abbin/main/detmoe_perf_layer --impls=megakernel,reference --routings=balanced \
  --shapes=deepseek-v3,mixtral-8x7b --knobs=0:0,0:1024,0:2048,0:4096 --timed=20 --warmup-seconds=1 \
  --benchmark_out="$out/band-knob.json" --benchmark_out_format=json >"$out/band-knob.log" 2>&1
echo "exit $?"; python3 perf/bench_medians.py "$out/band-knob.json" 2>&1 | head -40
step "ncu per kernel, fused against reference ($(left) s left)"
OUT=$out/kt BUDGET_S=$(( $(left) - 5 )) BIN=.abbin/main KT_SHAPES='mixtral-8x7b deepseek-v3' \
  KT_IMPLS='megakernel reference' KT_METRICS=dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second \
  bash ci/device-kernel-times.sh
step done
