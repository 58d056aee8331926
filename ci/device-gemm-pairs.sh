#!/usr/bin/env bash
# Needs detmoe_perf_gemm and detmoe_gemm_test built from branch dgrad-pairs (GroupedGemm::cluster_ctas;
# ran once, session 35, H200: pairs level or slower than lone CTAs on every case — docs/PERF.md).
# The GEMM core's CTA pairs (GroupedGemm::cluster_ctas = 2) on the GPU, with binaries built on the
# CPU machine: PAIRS_BIN/{detmoe_gemm_test,detmoe_perf_gemm} (carry .devdeps and .abbin; libbenchmark
# in .abbin/lib). Runs the pair and schedule tests, memcheck and racecheck of the pair test, the
# grouped forward and data-gradient GEMMs as lone CTAs / CTA pairs / one cuBLAS call per expert
# (median of the timed launches and J per launch; session 34: mixtral-8x7b's dx, the backward's
# dh·W_gate_up, runs 14 % behind cuBLAS's 2x1 multicast clusters as lone CTAs), and ncu's launch statistics and speed of light of chosen kernels (PAIRS_NCU_FILTER).
#   OUT=dir PAIRS_BIN=.abbin/pairs [PAIRS_FILTER=regex] [PAIRS_NCU=0] bash ci/device-gemm-pairs.sh
source "$(dirname "$0")/device-call.sh"
bin=${PAIRS_BIN:-.abbin/pairs}
use_prebuilt "$(dirname "$bin")"
step "gemm tests"
gtest_run gemm-tests 150 "$bin/detmoe_gemm_test" \
  "${PAIRS_TESTS:-*GemmClusterPairs*:CooperativeClusterLaunch.*:*GemmSchedule.*:*GemmExact*}"
for tool in $([ "${PAIRS_SANITIZE:-1}" = 0 ] || echo memcheck racecheck); do
  step "$tool of the pair test"
  timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/detmoe_gemm_test" \
    --gtest_filter='*GemmClusterPairs.SameBitsAsLoneCtas/*' >"$OUT/san-$tool.log" 2>&1
  echo "$tool exit $?"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Hazard|PASSED|FAILED' "$OUT/san-$tool.log" | head -4
done
step "grouped forward and data-gradient GEMMs: lone, pairs, cuBLAS per expert"
timeout "${PAIRS_BENCH_LIMIT:-300}" "$bin/detmoe_perf_gemm" --benchmark_filter="${PAIRS_FILTER:-grouped/.*_(forward|data_grad)/}" \
  --benchmark_out="$OUT/gemm-pairs.json" --benchmark_out_format=json >"$OUT/gemm-pairs.log" 2>&1
echo "bench exit $?"
python3 - "$OUT/gemm-pairs.json" <<'PY' 2>&1
import json, sys
rows = {}
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    name = b["name"].split("/iterations")[0].replace("gemm/grouped/", "")
    case, impl = name.rsplit("/", 1)
    rows.setdefault(case, {})[impl] = (b["median_ms"], b.get("joules_per_launch", 0.0))
print("%-34s %16s %16s %16s %8s %8s" % ("case", "ours ms (J)", "pairs ms (J)", "cublas ms (J)", "ours/pr", "cub/pr"))
for case, r in rows.items():
    f = lambda k: "%7.3f (%5.2f)" % r[k] if k in r else "-"
    ratio = lambda k: "%.3f" % (r[k][0] / r["ours_pairs"][0]) if k in r and "ours_pairs" in r else "-"
    print("%-34s %16s %16s %16s %8s %8s" % (case, f("ours"), f("ours_pairs"), f("cublas_per_expert"), ratio("ours"), ratio("cublas_per_expert")))
PY
if [ "${PAIRS_NCU:-1}" != 0 ] && [ "$(left)" -gt 60 ]; then
  # PAIRS_NCU_FILTER: which benchmarks' kernels (default: the GEMM core's deepseek-v3 up-projection,
  # lone and paired, and cuBLAS's per-expert kernels for it and mixtral-8x7b's).
  step "ncu launch statistics and speed of light"
  timeout $(( $(left) - 20 )) ncu --section LaunchStats --section SpeedOfLight --launch-skip 8 --launch-count 1 \
    "$bin/detmoe_perf_gemm" --benchmark_filter="${PAIRS_NCU_FILTER:-deepseek-v3_up_forward/ours_pairs}" \
    >"$OUT/ncu.log" 2>&1
  echo "ncu exit $?"; grep -E '^  [a-zA-Z_0-9]+.*\(|Cluster Size|Grid Size|Duration|Compute \(SM\) Throughput|Memory Throughput' "$OUT/ncu.log" | head -24
fi
