#!/usr/bin/env bash
# The megakernel backward on the GPU machine, in stages (issue 18): build there, the backward's
# GPU tests, the forward's (regression), compute-sanitizer on small backward cases, and a
# fwd+bwd bench beside the reference. Logs under $OUT; each stage has its own time limit, so a
# hang costs that stage, not the call.
#   STAGES="build bwd gemm named property fwd bench golden fuzz sanitize" (default: all)  BENCH_SHAPES=qwen3-30b-a3b,...  TIMED=20
set -uo pipefail
cd "$(dirname "$0")/.."
source ci/device-env.sh
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
STAGES=${STAGES:-build bwd gemm named property fwd bench golden fuzz sanitize}
B=build-device
T=$B/tests/megakernel/detmoe_layer_test
stage() { [[ " $STAGES " == *" $1 "* ]]; }
run() {  # name limit_s command...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|ERROR SUMMARY|hazard|Failure|rror:" "$OUT/$name.log" | head -30
  return $rc
}
if stage build; then
  run build 400 ci/device-build.sh $B detmoe_layer_test detmoe_gemm_test detmoe_perf_layer detmoe reference_fuzz_test || { tail -40 "$OUT/build.log"; exit 1; }
fi
if stage bwd; then
  run bwd-tests "${BWD_LIMIT:-300}" $T --gtest_filter="${BWD_FILTER:-*Backward*-*NamedShapes*:*Property*}"
fi
if stage gemm; then  # the epilogue math helpers, exhaustively over bf16 gates
  run gemm-tests 120 $B/tests/megakernel/detmoe_gemm_test --gtest_filter="${GEMM_FILTER:-*Swiglu*:PtxRcp*}"
fi
if stage named; then  # the named shapes vs the fp64 oracle (host-bound) and vs the reference
  run bwd-named "${NAMED_LIMIT:-300}" $T --gtest_filter="MegakernelBackwardNamedShapes.*"
fi
if stage property; then  # 300 rapidcheck problems each, forward and forward + backward vs the reference
  run property "${PROPERTY_LIMIT:-300}" $T --gtest_filter="MegakernelProperty.*:MegakernelBackwardProperty.*"
  grep -E "OK, passed|Falsifiable|Gave up" "$OUT/property.log" | head -5
fi
if stage fwd; then
  run fwd-tests "${FWD_LIMIT:-300}" $T --gtest_filter="${FWD_FILTER:-Megakernel*:Small/MegakernelVsReference.*-*Backward*:MegakernelProperty.*}"
fi
if stage bench; then
  run bench "${BENCH_LIMIT:-300}" $B/perf/detmoe_perf_layer --impls=megakernel,reference \
    --shapes="${BENCH_SHAPES:-qwen3-30b-a3b,deepseek-v3,mixtral-8x7b,gpt-oss-120b}" --routings="${BENCH_ROUTINGS:-balanced}" \
    --timed="${TIMED:-20}" --energy-window=0 ${BENCH_ARGS:-} --benchmark_out="$OUT/bench.json" --benchmark_out_format=json
  grep -E "median_ms" "$OUT/bench.log" | sed -E 's/ +[0-9.]+ ms +[0-9.]+ ms +[0-9]+ / /; s/ T=.*//' | head -40
fi
if stage golden; then  # the megakernel's hashes recorded again (its backward outputs are new), then both checked
  run golden-record 120 $B/detmoe golden record --impl megakernel
  cp golden/hashes/megakernel.*.json "$OUT/"
  run golden-check 120 bash -c "$B/detmoe golden check --impl megakernel | tail -3; $B/detmoe golden check --impl reference | tail -3"
  cat "$OUT/golden-check.log"
fi
if stage fuzz; then  # the seam's property test over the megakernel, fwd+bwd
  RC_PARAMS="max_success=${FUZZ_CASES:-60}" run layer-fuzz "${FUZZ_LIMIT:-120}" $B/fuzz/reference_fuzz_test \
    --gtest_filter='EveryImplementation/LayerFuzz.*/megakernel'
  grep -E "OK, passed|Falsifiable|Gave up" "$OUT/layer-fuzz.log" | head -5
fi
if stage sanitize; then
  for tool in memcheck racecheck; do
    run "sanitize-$tool" 240 compute-sanitizer --tool "$tool" --error-exitcode 9 $T \
      --gtest_filter="${SAN_FILTER:-Small/MegakernelBackward.*/0:Small/MegakernelBackward.*/2}"
  done
fi
