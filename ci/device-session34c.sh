#!/usr/bin/env bash
# Session 34's third call (docs/PERF.md session 34): the fused backward's da and dx phases lose to
# the reference's da and dx GEMM calls (second call's --phases); is it the GEMM core's tile against
# cuBLAS's, or the fused kernel's three operand stages (the GEMM core has four)? Trees built here:
#   ph = main with the phase marks (detmoe, detmoe_perf_layer, detmoe_layer_test):
#        ninja -C build detmoe detmoe_perf_layer detmoe_layer_test && ci/ab-knob-trees.sh build .abbin ph
#   g4 = main's detmoe_perf_gemm (the GEMM core, 4 stages): cp build/perf/detmoe_perf_gemm .abbin/g4/
#   g3 = the same with Tile128x256::kStages = 3 (a worktree, not committed): .abbin/g3/
#   OUT=dir BUDGET_S=300 bash ci/device-session34c.sh        (carry .devdeps .abbin)
# 1. the phase marks' GPU tests; 2. the GEMM core with 4 and 3 stages and cuBLAS per expert on the
# large-expert shapes' forward and data-gradient GEMMs (g4, g3, g4 again: the drift between them);
# 3. deepseek-v3's task timeline (the fused backward's phases with their clocks); 4. --phases on
# all four shapes, both routings.
source "$(dirname "$0")/device-call.sh"
use_prebuilt
out=$OUT
step "the phase marks' GPU tests"
timeout 60 .abbin/ph/detmoe_layer_test --gtest_filter='PhaseMarks.*' >"$out/tests.log" 2>&1
echo "tests exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure|Expected|Which is' "$out/tests.log" | head -12
filter='grouped/(mixtral-8x7b|deepseek-v3)_(up|down)_(forward|data_grad)/'
summ() { python3 - "$1" <<'PY' || true
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    print("  %-58s %8.3f ms %6.1f TFLOP/s %6.3f J" % (b["name"].split("/iterations")[0], b["median_ms"], b["tflops"], b.get("joules_per_launch", 0)))
PY
}
for t in g4 g3 g4b; do
  bin=.abbin/${t%b}/detmoe_perf_gemm
  f="$filter"; [ "$t" = g4 ] || f="$filter"'ours'
  step "GEMM core $t ($(left) s left)"
  timeout 120 $bin --benchmark_filter="$f" --benchmark_out="$out/gemm-$t.json" --benchmark_out_format=json >"$out/gemm-$t.log" 2>&1
  echo "exit $?"; summ "$out/gemm-$t.json"
done
step "trace, deepseek-v3 balanced ($(left) s left)"
timeout 60 .abbin/ph/detmoe_perf_layer --impls=megakernel --routings=balanced --shapes=deepseek-v3 --timed=5 --trace \
  >"$out/trace-deepseek.log" 2>&1
echo "trace exit $?"; grep -E 'task timeline|kind|bwd|GEMM|dispatch|sum' "$out/trace-deepseek.log" | grep -v '^megakernel' | head -24
step "phases, all shapes ($(left) s left)"
timeout $(( $(left) - 10 )) .abbin/ph/detmoe_perf_layer --impls=megakernel,reference --routings=balanced,zipf1 \
  --timed=20 --warmup-seconds=1 --phases --benchmark_out="$out/phases.json" --benchmark_out_format=json >"$out/phases.log" 2>&1
echo "phases exit $?"; grep -E 'phases, median' "$out/phases.log" | sed 's/^/  /'
step done
