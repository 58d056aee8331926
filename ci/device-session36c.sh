#!/usr/bin/env bash
# Session 36's last call, cut to ≈ 140 s of device time after the refusals: session36b's first three
# steps without the kernel-times step (binaries and carry as there). Tests of gemm-band; the core's
# deals (tickets for every tile, one launch per expert) against the default and cuBLAS per expert,
# time and J; ncu's DRAM bytes of the ticket deal on mixtral-8x7b's dx; the fused forward's band
# (overlap rows 0 = 16 m-blocks against 4096 = 32) in two rounds.
#   OUT=dir BUDGET_S=140 bash ci/device-session36c.sh
source "$(dirname "$0")/device-call.sh"
use_prebuilt
out=$OUT
step "gemm-band tests ($(left) s left)"
gtest_run gemm-tests 40 .abbin/gemm/detmoe_gemm_test '*GemmSchedule.*:GemmValidate.*'
step "the core's deals, time and energy ($(left) s left)"
timeout 45 .abbin/gemm/detmoe_perf_gemm --deals=tickets,per_expert \
  --benchmark_filter='grouped/(mixtral-8x7b_up_data_grad|deepseek-v3_up_forward)/' \
  --benchmark_out="$out/gemm-deals.json" --benchmark_out_format=json >"$out/gemm-deals.log" 2>&1
echo "exit $?"; python3 -c '
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    print(b["name"].split("/iterations")[0].replace("gemm/grouped/", ""), "%.3f ms" % b["median_ms"], "%.2f J" % b.get("joules_per_launch", 0))
' "$out/gemm-deals.json" 2>&1 | head -20
step "fused forward band, two rounds ($(left) s left)"
for round in 1 2; do
  timeout 30 .abbin/main/detmoe_perf_layer --impls=megakernel,reference --routings=balanced \
    --shapes=deepseek-v3,mixtral-8x7b --knobs=0:0,0:4096 --timed=20 --warmup-seconds=1 --benchmark_filter='/fwd(/|$)' \
    --benchmark_out="$out/fwd-band-r$round.json" --benchmark_out_format=json >"$out/fwd-band-r$round.log" 2>&1
  echo "round $round exit $?"; python3 -c '
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    print(b["name"].split("/iterations")[0], "%.3f ms" % b["median_ms"], "%.2f J" % b.get("joules_per_step", 0))
' "$out/fwd-band-r$round.json" 2>&1 | head -20
done
step "ncu: the ticket deal's DRAM bytes ($(left) s left)"
[ "$(left)" -gt 25 ] && OUT=$out/gemm-ncu BUDGET_S=$(( $(left) - 5 )) BIN=.abbin/gemm GEMM_NCU_IMPLS='ours_tickets' \
  GEMM_NCU_ARGS='--deals=tickets' GEMM_NCU_CASE='mixtral-8x7b_up_data_grad' bash ci/device-gemm-ncu.sh
step done
