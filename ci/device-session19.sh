#!/usr/bin/env bash
# The landing call of session 18's forward stack (four staging slabs, GEMM1's SwiGLU hand-off),
# first run in session 19 — build, the megakernel GPU tests, racecheck + memcheck at P = 1, 2, 4
# loopback, the golden check — then the same-run bench of megakernel, reference and torch
# pipeline (fwd and fwd+bwd, capped steady state) balanced; the GEMM floor against cuBLAS per
# expert (the reference's GEMMs) on deepseek and mixtral; zipf1 if time is left; the backward
# property tests last.
#   OUT=dir BUDGET_S=540 bash ci/device-session19.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
step build
build_device detmoe detmoe_perf_layer detmoe_layer_test detmoe_perf_gemm
B=build-device
step tests
layer_tests tests 150 'Megakernel*:LayerTrace*-*NamedShapes.MatchReference:*Property.Random*'
for tool in racecheck memcheck; do
  sanitize_verify $tool --shape small-shared --routing zipf1
  sanitize_verify $tool --shape small --routing hot:0.5 --P 2 --backend loopback
  sanitize_verify $tool --shape small-shared --routing zipf1 --P 4 --backend loopback
done
step golden
timeout 90 $B/detmoe golden check --impl megakernel 2>&1 | tail -1
for routing in balanced zipf1; do
  if [ $routing = zipf1 ] && [ "$(left)" -gt 120 ]; then
    step "GEMM floor vs cuBLAS per expert ($(left) s left)"
    timeout 100 $B/perf/detmoe_perf_gemm --benchmark_filter='grouped/(deepseek-v3|mixtral-8x7b)_(up|down)_forward' \
      --benchmark_out="$OUT/gemm-floor.json" --benchmark_out_format=json >"$OUT/gemm-floor.log" 2>&1
    echo "gemm floor exit $?"; grep -E '^gemm/' "$OUT/gemm-floor.log"
    # Band height on the shapes whose experts' weights dwarf L2 (never swept there): band 8
    # (default) reads each weight panel twice per 16-m-block expert, band 16 once.
    step "band height deepseek/mixtral ($(left) s left)"
    for round in 1 2; do
      timeout 60 $B/perf/detmoe_perf_layer --shapes=deepseek-v3,mixtral-8x7b --routings=balanced --impls=megakernel \
        --knobs=0:0,0:2048 --warmup-seconds=1 --benchmark_filter='/fwd/' --benchmark_out="$OUT/band-$round.json" >"$OUT/band-$round.log" 2>&1
      echo "band round $round exit $?"; grep -E '^megakernel/' "$OUT/band-$round.log" | sed -E 's/ +/ /g' | cut -c1-160
    done
  fi
  [ "$(left)" -gt 150 ] || break
  step "bench $routing ($(left) s left)"
  timeout $(( $(left) - 20 )) $B/detmoe bench --impl megakernel --routing $routing --warmup-seconds 1 \
    --perf-binary $B/perf/detmoe_perf_layer --json "$OUT/bench-$routing.json" >"$OUT/bench-$routing.log" 2>&1
  echo "bench $routing exit $?"; grep -vE '^(Run on|CPU Caches|  L[123]|Load Average|-----)' "$OUT/bench-$routing.log" | tail -30
done
if [ "$(left)" -gt 40 ]; then
  step "backward property ($(left) s left)"
  RC_PARAMS="max_success=100" layer_tests property $(( $(left) - 10 )) 'MegakernelBackwardProperty.Random*'
fi
step done
