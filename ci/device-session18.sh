#!/usr/bin/env bash
# Session 18's landing call: the forward stack (four staging slabs, GEMM1's SwiGLU hand-off) as it
# lands — build, the megakernel GPU tests, racecheck + memcheck at P = 1, 2, 4 loopback, the
# golden check — then the same-run bench of megakernel, reference and torch pipeline (fwd and
# fwd+bwd, capped steady state) balanced, zipf1 if time is left, and the property tests last.
#   OUT=dir BUDGET_S=520 bash ci/device-session18.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
step build
build_device detmoe detmoe_perf_layer detmoe_layer_test
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
