#!/usr/bin/env bash
# Session 29's call (docs/PERF.md session 29): session 28's two backward branches and the weight
# gradients' CTA pairs, in one call with binaries built on the CPU machine.
#   ci/ab-rev-trees.sh .abbin both=2b177a0 staged=a47d692
#   ci/ab-knob-trees.sh build .abbin base 'pairs=--wgrad-cluster=2'   (build = branch wgrad-pairs)
#   mkdir -p .abbin/gemm && cp build/tests/megakernel/detmoe_gemm_test build/perf/detmoe_perf_gemm .abbin/gemm/ && strip .abbin/gemm/*
#   OUT=dir BUDGET_S=580 bash ci/device-session29.sh        (carry .devdeps .abbin)
# 1. the GEMM core's pair tests (forward and weight gradient, bits against lone CTAs; memcheck of
#    the weight-gradient one) and the backward's D1 arms with pairs (`base` = wgrad-pairs' build);
# 2. the weight gradients of mixtral-8x7b and deepseek-v3 as the second launch runs them, lone
#    CTAs against pairs (GEMM core alone, median of the timed launches);
# 3. ci/device-ab-prebuilt.sh over both / base / pairs / staged (tests, sanitizers and golden on
#    `both`, the reference in every round, torch after if time is left).
source "$(dirname "$0")/device-call.sh"
source ci/device-env.sh
out=$OUT
export LD_LIBRARY_PATH=$PWD/.abbin/lib:$LD_LIBRARY_PATH
chmod +x .abbin/*/detmoe* 2>/dev/null
step "pair tests (GEMM core)"
timeout 120 .abbin/gemm/detmoe_gemm_test --gtest_filter='GemmClusterPairs.*:CooperativeClusterLaunch.*:*GemmSchedule.*' \
  >"$OUT/pairs-tests.log" 2>&1
echo "exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure' "$OUT/pairs-tests.log" | head -12
step "memcheck of the weight-gradient pair test"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 .abbin/gemm/detmoe_gemm_test \
  --gtest_filter='GemmClusterPairs.WeightGradSameBitsAsLoneCtas' >"$OUT/pairs-memcheck.log" 2>&1
echo "memcheck exit $?"; grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/pairs-memcheck.log" | head -3
step "backward D1 arms incl. pairs"
timeout 120 .abbin/base/detmoe_layer_test --gtest_filter='MegakernelBackwardD1.WeightGradLaunchGivesIdenticalBits' \
  >"$OUT/pairs-d1.log" 2>&1
echo "exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure' "$OUT/pairs-d1.log" | head -6
step "weight gradients alone: lone CTAs against pairs"
timeout "${PAIRS_BENCH_LIMIT:-90}" .abbin/gemm/detmoe_perf_gemm \
  --benchmark_filter="${PAIRS_FILTER:-grouped/(mixtral-8x7b|deepseek-v3)_.*weight_grad_fp32out/}" \
  --benchmark_out="$OUT/gemm-wgrad-pairs.json" --benchmark_out_format=json >"$OUT/gemm-wgrad-pairs.log" 2>&1
echo "exit $?"
python3 - "$OUT/gemm-wgrad-pairs.json" <<'PY' 2>&1
import json, sys
rows = {}
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    case, impl = b["name"].split("/iterations")[0].replace("gemm/grouped/", "").rsplit("/", 1)
    rows.setdefault(case, {})[impl] = b["median_ms"]
for case, r in rows.items():
    lone, pairs = r.get("ours"), r.get("ours_pairs")
    print("%-44s lone %8.3f  pairs %8.3f  lone/pairs %.3f" % (case, lone or 0, pairs or 0, (lone / pairs) if lone and pairs else 0))
PY
OUT=$out/ab BUDGET_S=$(( $(left) - 10 )) AB_BIN=.abbin AB_NAMES="${AB_NAMES:-both base pairs staged}" AB_ROUNDS=2 AB_REF=round \
  AB_TORCH=1 AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=60 bash ci/device-ab-prebuilt.sh
step done
