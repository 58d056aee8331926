#!/usr/bin/env bash
# A short A/B call with binaries built on the CPU machine (when device time is too short to build
# two trees there): AB_BIN holds <name>/{detmoe,detmoe_perf_layer,detmoe_layer_test} per tree and
# lib/ for runtime libraries .devdeps lacks (libbenchmark). The first tree with binaries gets the megakernel GPU
# tests, racecheck + memcheck of fwd+bwd at P = 1 and 4 loopback and the golden check; then
# alternating timing rounds (AB_ROUNDS, AB_BENCH_ARGS; AB_ROUTING, default balanced) and one traced
# run of the first tree; perf/ab_summary.py prints the rounds' medians at the end.
#   OUT=dir AB_BIN=.abbin AB_NAMES='top main' bash ci/device-ab-prebuilt.sh   (carry .devdeps .abbin)
# AB_REF=round times the reference in every round after the trees (ab-reference-<round>.json), so
# each tree's ratio to it is taken within a round; AB_REF=1 times it once after the rounds.
# A tree may be a wrapper: ci/ab-knob-trees.sh lays out trees that run one build with other flags.
source "$(dirname "$0")/device-call.sh"
bin=${AB_BIN:-.abbin}
use_prebuilt "$bin"
names=${AB_NAMES:?}
first=${names%% *}
# Tests, sanitizers and golden need a tree with the binaries: a wrapper tree (ab-knob-trees.sh, or
# one that only sets the environment) has detmoe_perf_layer alone, so take the first that has them.
tested=$first
for name in $names; do [ -f "$bin/$name/detmoe_layer_test" ] && { tested=$name; break; }; done
mkdir -p build-device && cp "$bin/$tested/detmoe" build-device/detmoe
step "tests of $tested"
timeout "${TESTS_LIMIT:-150}" "$bin/$tested/detmoe_layer_test" \
  --gtest_filter="${AB_TESTS:-Megakernel*:LayerTrace*-*NamedShapes.MatchReference:*Property.Random*}" >"$OUT/tests.log" 2>&1
echo "tests exit $?"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure' "$OUT/tests.log" | head -12
# AB_SANITIZE=0 skips compute-sanitizer (a call short of device time; say so where it is reported)
for tool in $([ "${AB_SANITIZE:-1}" = 0 ] || echo racecheck memcheck); do
  sanitize_verify $tool --shape small-shared --routing zipf1
  # AB_SANITIZE_P4=0 skips the P = 4 loopback run (a call short of device time)
  [ "${AB_SANITIZE_P4:-1}" = 0 ] || sanitize_verify $tool --shape small-shared --routing zipf1 --P 4 --backend loopback
done
step golden
timeout 90 build-device/detmoe golden check --impl megakernel 2>&1 | tail -1
# `timed TREE IMPL FILE SLACK`: TREE's detmoe_perf_layer times IMPL on the A/B shapes into
# $OUT/FILE.json (log FILE.log), leaving SLACK seconds of the budget; prints each median and J/step.
timed() {
  timeout $(( $(left) - $4 )) "$bin/$1/detmoe_perf_layer" --impls="$2" --routings="${AB_ROUTING:-balanced}" \
    --shapes="${AB_SHAPES:-deepseek-v3,mixtral-8x7b,qwen3-30b-a3b,gpt-oss-120b}" --timed=20 ${AB_BENCH_ARGS:-} \
    --benchmark_out="$OUT/$3.json" --benchmark_out_format=json >"$OUT/$3.log" 2>&1
  echo "exit $?: $(python3 -c '
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    print(b["name"].split("/iterations")[0].replace("megakernel/", ""), "%.3f" % b["median_ms"], "%.3f" % b.get("joules_per_step", 0), end="  |  ")
' "$OUT/$3.json" 2>&1)"
}
# AB_TORCH=1: the PyTorch pipeline (perf/torch_moe_pipeline.py, /opt/torch's Python) on the same
# shapes and routing after the rounds, so torch / megakernel ratios come from this call;
# AB_TORCH=first runs it before the rounds (a call that may run out of time in them).
torch_pipeline() {
  step "torch pipeline ($(left) s left)"
  timeout $(( $(left) - 20 )) "${TORCH_PYTHON:-/opt/torch/.venv/bin/python}" perf/torch_moe_pipeline.py \
    --shapes="${AB_SHAPES:-deepseek-v3,mixtral-8x7b,qwen3-30b-a3b,gpt-oss-120b}" --routings="${AB_ROUTING:-balanced}" \
    --timed=20 --warmup-seconds=1 --json "$OUT/torch-pipeline.json" >"$OUT/torch-pipeline.log" 2>&1
  echo "torch exit $?"; python3 -c '
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    print(r["shape"], r["routing"], r["pass"], "%.3f" % r["median_ms"])
' "$OUT/torch-pipeline.json" 2>&1 | head -16
}
if [ "${AB_TORCH:-0}" = first ] && [ "$(left)" -gt 60 ]; then torch_pipeline; fi
# AB_ALTERNATE=1 runs the trees in reverse order in even rounds: in-process order biased session 36's
# knob comparisons (whichever ran second looked faster), so an A/B of a few % alternates.
for round in $(seq 1 "${AB_ROUNDS:-1}"); do
  order=$names
  [ "${AB_ALTERNATE:-0}" = 1 ] && [ $(( round % 2 )) = 0 ] && order=$(printf '%s\n' $names | tac | xargs)
  for name in $order; do
    # AB_ROUND_MIN / AB_ROUND_SLACK: seconds a round needs to start / leaves unused (defaults 70 / 40)
    [ "$(left)" -gt "${AB_ROUND_MIN:-70}" ] || break 2
    step "round $round $name ($(left) s left)"
    timed "$name" megakernel "ab-$name-$round" "${AB_ROUND_SLACK:-40}"
  done
  if [ "${AB_REF:-}" = round ] && [ "$(left)" -gt "${AB_ROUND_MIN:-70}" ]; then
    step "round $round reference ($(left) s left)"
    timed "$tested" reference "ab-reference-$round" "${AB_ROUND_SLACK:-40}"
  fi
done
# AB_REF=1: the reference timed once with the same arguments, so ref / mk ratios come from the
# same call (issue 19 and 18 measure against it).
if [ -n "${AB_REF:-}" ] && [ "${AB_REF:-}" != round ] && [ "$(left)" -gt 70 ]; then
  step "reference ($(left) s left)"
  timed "$tested" reference ab-reference 30
fi
if [ -n "${TRACE_SHAPES:-}" ] && [ "$(left)" -gt 25 ]; then
  step "trace of $first ($(left) s left)"
  timeout $(( $(left) - 5 )) "$bin/$first/detmoe_perf_layer" --impls=megakernel --routings="${AB_ROUTING:-balanced}" --shapes="$TRACE_SHAPES" \
    --timed=5 --trace >"$OUT/trace.log" 2>&1
  echo "trace exit $?"; grep -vE '^(Run on|CPU Caches|  L[123]|Load Average|-----)' "$OUT/trace.log" | head -70
fi
if [ "${AB_TORCH:-0}" = 1 ] && [ "$(left)" -gt 60 ]; then torch_pipeline; fi
step summary
python3 perf/ab_summary.py "$OUT" 2>&1 | head -60
# With the reference in every round and the torch pipeline, issues 18 and 19's bars for the first tree.
if [ "${AB_REF:-}" = round ] && [ -f "$OUT/torch-pipeline.json" ]; then
  step "issues 18 and 19's bars, tree $first"
  # AB_BF16_TREE: a tree run with --grad-dtype=bf16, whose fwd+bwd torch / mk is printed like for like
  (cd perf && python3 acceptance_verdict.py "$OUT" --tree "$first" ${AB_BF16_TREE:+--bf16-grads-tree "$AB_BF16_TREE"}) 2>&1 |
    awk '/bf16 weight gradients/ {tail = 1} tail || /FAIL|MISSING|verdict|^tree/'
fi
step done
