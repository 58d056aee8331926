#!/usr/bin/env bash
# Session 34's second call (docs/PERF.md session 34): where mixtral-8x7b's backward loses its
# 1.2 ms to the reference, with both measured in the same power-capped steady state. Tree ph =
# main with the phase marks (detmoe/phase_marks.h; host code only, the kernels are main's), built
# on the CPU machine:
#   ninja -C build detmoe detmoe_perf_layer && ci/ab-knob-trees.sh build .abbin ph
#   OUT=dir BUDGET_S=420 bash ci/device-session34b.sh        (carry .devdeps .abbin)
# 0. the phase marks' GPU tests (names in order, no bits changed);
# 1. --phases: the megakernel's launches (fused forward, fused backward, dW_down, dW_gate_up) and
#    the reference's phases (gather, GEMM calls, glue kernels), median of 20 back-to-back steps
#    after a 1 s warm-up, mixtral-8x7b and deepseek-v3, both routings;
# 2. ncu's warp-stall samples per SASS instruction of mixtral-8x7b's fused backward launch, with the
#    dSwiGLU epilogue's span (MUFU.EX2) summarised: what its 11.7 µs per da tile wait on since the
#    slice loop was rolled (session 32 had 57 % instruction fetch before the roll).
source "$(dirname "$0")/device-call.sh"
use_prebuilt
out=$OUT
bin=.abbin/ph
step "the phase marks' GPU tests"
timeout 60 $bin/detmoe_layer_test --gtest_filter='PhaseMarks.*' >"$out/tests.log" 2>&1
echo "tests exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure|Expected|Which is' "$out/tests.log" | head -12
step "phases, megakernel and reference ($(left) s left)"
timeout $(( $(left) - 200 )) $bin/detmoe_perf_layer --impls=megakernel,reference --shapes=mixtral-8x7b,deepseek-v3 \
  --routings=balanced,zipf1 --timed=20 --warmup-seconds=1 --phases \
  --benchmark_out="$out/phases.json" --benchmark_out_format=json >"$out/phases.log" 2>&1
echo "phases exit $?"; grep -E 'phases, median' "$out/phases.log" | sed 's/^/  /'
python3 - "$out/phases.json" <<'EOF' || true
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    print(b["name"].split("/iterations")[0], "median %.3f ms" % b["median_ms"])
EOF
step "ncu source counters, mixtral-8x7b fused backward ($(left) s left)"
timeout $(( $(left) > 230 ? 220 : $(left) - 10 )) ncu --section SourceCounters --section WarpStateStats \
  --kernel-name regex:layer_backward --launch-count 1 -f -o "$out/bwd" $bin/detmoe verify --impl megakernel \
  --shape mixtral-8x7b --no-oracle >"$out/ncu.log" 2>&1
echo "ncu exit $?"; tail -3 "$out/ncu.log"
if [ -f "$out/bwd.ncu-rep" ]; then
  ncu -i "$out/bwd.ncu-rep" --page details --csv >"$out/details.csv" 2>/dev/null
  grep -E 'Duration|SM Frequency|Issue Slots Busy|No Eligible' "$out/details.csv" | head -8
  ncu -i "$out/bwd.ncu-rep" --page source --csv --print-source sass >"$out/sass.csv" 2>"$out/sass.err"
  echo "source page exit $? ($(wc -l <"$out/sass.csv") lines)"
  python3 perf/ncu_hotspots.py "$out/sass.csv" --top 30 --context 2 --span MUFU.EX2 >"$out/stalls.txt"
  head -90 "$out/stalls.txt"
  gzip -f "$out/sass.csv"; rm -f "$out/bwd.ncu-rep"
fi
step done
