#!/usr/bin/env bash
# Session 30's call (docs/PERF.md session 30): consumer leads — consumer warpgroup 0 starts k-blocks
# ahead of warpgroup 1, so one's epilogue overlaps the other's mainloop — in the GEMM core's
# weight-gradient launches (branch wg-lead) and in the fused forward and backward kernels (branch
# fused-lead, on wg-lead), with binaries built on the CPU machine:
# Its kernels are on branch fused-lead only (main holds the record, docs/PERF.md session 30); run it
# from a checkout of that branch.
#   ci/ab-knob-trees.sh build .abbin flead 'wlead=--lead=0' 'l0=--lead=0 --wgrad-lead=0'   (build = fused-lead)
#   ci/ab-rev-trees.sh .abbin base=main
#   mkdir -p .abbin/gemm && cp build/tests/megakernel/detmoe_gemm_test build/perf/detmoe_perf_gemm .abbin/gemm/ && strip .abbin/gemm/*
#   OUT=dir BUDGET_S=580 bash ci/device-session30.sh        (carry .devdeps .abbin)
# 1. the GEMM core's schedule tests with the new lead test, and memcheck + racecheck of it;
# 2. the weight gradients alone: lockstep against leads 2 and 4 (GEMM core, fp32 out, balanced);
# 3. ci/device-ab-prebuilt.sh over flead (both leads, the branch's rules: fused 3, weight gradients 4)
#    / wlead (weight gradients only) / l0 (both in lockstep) / base (main): tests, sanitizers and
#    golden on flead (the megakernel tests include the D1 arms with leads), the reference in every round, torch after if time is left.
source "$(dirname "$0")/device-call.sh"
source ci/device-env.sh
out=$OUT
export LD_LIBRARY_PATH=$PWD/.abbin/lib:$LD_LIBRARY_PATH
chmod +x .abbin/*/detmoe* 2>/dev/null
step "GEMM core schedule tests incl. the consumer lead"
timeout 120 .abbin/gemm/detmoe_gemm_test --gtest_filter='*GemmSchedule.*:GemmValidate.*' >"$OUT/lead-tests.log" 2>&1
echo "exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure' "$OUT/lead-tests.log" | head -12
for tool in memcheck racecheck; do
  step "$tool of the weight-gradient lead test"
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 .abbin/gemm/detmoe_gemm_test \
    --gtest_filter='*GemmSchedule.ConsumerLeadDoesNotChangeBits/WeightGrad' >"$OUT/lead-$tool.log" 2>&1
  echo "$tool exit $?"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/lead-$tool.log" | head -3
done
step "weight gradients alone: lockstep against leads 2 and 4"
timeout "${LEAD_BENCH_LIMIT:-100}" .abbin/gemm/detmoe_perf_gemm --benchmark_filter='grouped/.*weight_grad_fp32out/' \
  --benchmark_out="$OUT/gemm-wgrad-lead.json" --benchmark_out_format=json >"$OUT/gemm-wgrad-lead.log" 2>&1
echo "exit $?"
python3 - "$OUT/gemm-wgrad-lead.json" <<'PY' 2>&1
import json, sys
rows = {}
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    case, impl = b["name"].split("/iterations")[0].replace("gemm/grouped/", "").rsplit("/", 1)
    rows.setdefault(case, {})[impl] = b["median_ms"]
for case, r in rows.items():
    base = r.get("ours") or 0
    print("%-40s lockstep %7.3f  lead2 %7.3f  lead4 %7.3f  lockstep/lead4 %.3f" % (
        case, base, r.get("ours_lead2", 0), r.get("ours_lead4", 0), base / r["ours_lead4"] if r.get("ours_lead4") else 0))
PY
OUT=$out/ab BUDGET_S=$(( $(left) - 10 )) AB_BIN=.abbin AB_NAMES="${AB_NAMES:-flead wlead l0 base}" AB_ROUNDS=2 AB_REF=round \
  AB_TORCH=1 AB_ROUTING=balanced,zipf1 AB_BENCH_ARGS=--warmup-seconds=1 AB_ROUND_MIN=60 bash ci/device-ab-prebuilt.sh
step done
