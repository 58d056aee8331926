#!/usr/bin/env bash
# A kernel change checked and timed in one device call: source trees built side by side
# (perf/megakernel_ab.sh; AB_TREES, first = the new one), the first tree's GPU tests (AB_TESTS),
# a custom shape under memcheck (AB_REPRO), compute-sanitizer racecheck + memcheck of fwd+bwd at
# P = 1, 2, 4 loopback on the first tree, then a same-run timing (AB_ROUNDS, AB_SHAPES) and, with
# TRACE_SHAPES, one traced run of the first tree (per-tile mainloop / epilogue, stderr). Then, on
# the first tree: GEMM_FILTER (detmoe_gemm_test with that filter), `detmoe golden check --impl
# megakernel`, and with PROPERTY_N the forward and backward property tests at N problems each in
# what is left of BUDGET_S. AB_SANITIZE_TOOLS (default "racecheck memcheck"; empty: none) picks the
# compute-sanitizer tools.
#   OUT=dir AB_TREES='new=.ab/new main=.ab/main' bash ci/device-ab-check.sh   (carry .devdeps .ab)
source "$(dirname "$0")/device-call.sh"
: "${AB_TREES:?}"
export AB_TREES
first=${AB_TREES%% *}; first_dir=${first#*=}
step "build + tests + memcheck repro"
AB_ROUNDS=0 AB_WORK=/tmp/ab-tests AB_TESTS=${AB_TESTS:-'Megakernel*:LayerTrace*-*NamedShapes.MatchReference:*Property.Random*'} \
  AB_REPRO=${AB_REPRO:-'--T 300 --H 1024 --F 512 --E 16 --k 4'} AB_MEMCHECK=1 timeout ${TESTS_LIMIT:-330} perf/megakernel_ab.sh >/dev/null 2>&1
echo "ab (build/tests) exit $?"; cat "$OUT/ab-summary.txt"; mv "$OUT/ab-logs.tgz" "$OUT/ab-tests-logs.tgz"
ln -sfn "$first_dir/build-ab" build-device
source ci/device-env.sh
for tool in ${AB_SANITIZE_TOOLS-racecheck memcheck}; do
  sanitize_verify $tool --shape small-shared --routing zipf1
  sanitize_verify $tool --shape small --routing hot:0.5 --P 2 --backend loopback
  sanitize_verify $tool --shape small-shared --routing zipf1 --P 4 --backend loopback
done
step "A/B timing ($(left) s left)"
reserve=$(( ${TRACE_SHAPES:+60} + 5 ))
AB_ROUNDS=${AB_ROUNDS:-2} AB_SHAPES=${AB_SHAPES:-deepseek-v3,mixtral-8x7b,qwen3-30b-a3b,gpt-oss-120b} \
  timeout $(( $(left) - reserve )) perf/megakernel_ab.sh >/dev/null 2>&1
echo "ab timing exit $?"; grep round "$OUT/ab-summary.txt"
if [ -n "${TRACE_SHAPES:-}" ]; then
  step "trace of $first ($(left) s left)"
  timeout $(( $(left) - 5 )) build-device/perf/detmoe_perf_layer --impls=megakernel --routings=balanced --shapes="$TRACE_SHAPES" \
    --timed=5 --trace >"$OUT/trace.log" 2>&1
  echo "trace exit $?"; grep -vE '^(Run on|CPU Caches|  L[123]|Load Average|-----)' "$OUT/trace.log" | head -60
fi
if [ -n "${GEMM_FILTER:-}" ]; then
  step "detmoe_gemm_test $GEMM_FILTER"
  ( source "$first_dir/ci/device-env.sh" && ninja -C "$first_dir/build-ab" detmoe_gemm_test >"$OUT/build-gemm-test.log" 2>&1 &&
    timeout 120 "$first_dir/build-ab/tests/megakernel/detmoe_gemm_test" --gtest_filter="$GEMM_FILTER" 2>&1 |
    grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure' | head -8 ) || echo "gemm test build failed"
fi
step golden
timeout 90 build-device/detmoe golden check --impl megakernel 2>&1 | tail -1
if [ -n "${PROPERTY_N:-}" ]; then
  for prop in MegakernelProperty MegakernelBackwardProperty; do
    step "$prop ($PROPERTY_N problems, $(left) s left)"
    [ "$(left)" -gt 30 ] && RC_PARAMS="max_success=$PROPERTY_N" layer_tests "$prop" $(( ($(left) - 10) / 2 )) "$prop.Random*"
  done
fi
step done
