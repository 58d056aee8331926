#!/usr/bin/env bash
# A/B in one device call: build several source trees of the megakernel side by side and time them
# alternately in the same run (same GPU, same clocks), so a change's effect is not confused with
# the machine's drift between calls (the PyTorch baseline itself moved 2–6 % between two calls).
#   OUT=dir AB_TREES='new=.lead base=.lead_base' AB_SHAPES=gpt-oss-120b,mixtral-8x7b AB_ROUNDS=2 \
#     AB_REPRO='--T 32 --H 2880 --F 2880 --E 16 --k 4 --Fs 128' AB_MEMCHECK=1 perf/megakernel_ab.sh
# Each tree is a `git archive` of one commit; .devdeps (from the current directory) is linked into
# each. AB_REPRO: a custom shape run once per tree with `detmoe verify --impl megakernel
# --forward-only --no-oracle`, the first tree's under compute-sanitizer memcheck when AB_MEMCHECK=1.
# AB_TESTS: a gtest filter run with the first tree's detmoe_layer_test before the timing.
# AB_TARGETS: what each tree builds (default: detmoe detmoe_perf_layer detmoe_layer_test); the
# first tree always builds detmoe_layer_test too when AB_TESTS is set.
# AB_NCU=shape: one launch of that shape per tree under ncu (duration, DRAM bytes, L2 hit rate).
# The logs go to a scratch folder and come back as one archive, $OUT/ab-logs.tgz (the device tool
# returns at most 8 files), beside $OUT/ab-summary.txt (this script's output).
set -uo pipefail
OUT=${OUT:?}
mkdir -p "$OUT"
final_out=$OUT
OUT=${AB_WORK:-/tmp/ab-work}
mkdir -p "$OUT"
exec > >(tee "$final_out/ab-summary.txt") 2>&1
trap 'tar czf "$final_out/ab-logs.tgz" -C "$OUT" .' EXIT
trees=${AB_TREES:?}
jobs=$(( $(nproc) / $(echo "$trees" | wc -w) ))
builds=()
deps=$PWD/.devdeps
first=${trees%% *}
for spec in $trees; do
  name=${spec%%=*}; dir=${spec#*=}
  targets=${AB_TARGETS:-detmoe detmoe_perf_layer detmoe_layer_test}
  [ -n "${AB_TESTS:-}" ] && [ "$spec" = "$first" ] && targets="$targets detmoe_layer_test"
  ( ln -sfn "$deps" "$dir/.devdeps"
    cd "$dir" && source ci/device-env.sh &&
      cmake -S . -B build-ab -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$deps/usr" \
        -DCMAKE_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu" -DNCCL_ROOT="$DETMOE_NCCL_ROOT" >/dev/null &&
      ninja -C build-ab -j"$jobs" $targets >"$OUT/build-$name.log" 2>&1
    echo "build $name exit $?" ) &
  builds+=($!)
done
# Wait for the builds by pid: a bare `wait` also waits for the tee of the process substitution
# above, which never ends (it hung a device call until its limit).
wait "${builds[@]}"
source "${first#*=}/ci/device-env.sh"
for spec in $trees; do
  name=${spec%%=*}; dir=${spec#*=}
  [ -n "${AB_REPRO:-}" ] || break
  pre=(); [ "${AB_MEMCHECK:-0}" = 1 ] && [ "$spec" = "$first" ] && pre=(compute-sanitizer --tool memcheck --error-exitcode 9)
  timeout 150 "${pre[@]}" "$dir/build-ab/detmoe" verify --impl megakernel --forward-only --no-oracle $AB_REPRO \
    >"$OUT/repro-$name.log" 2>&1
  echo "repro $name exit $?"; grep -E "Invalid|ERROR SUMMARY|rror|PASS|FAIL|at 0x" "$OUT/repro-$name.log" | head -12
done
if [ -n "${AB_TESTS:-}" ]; then
  ( cd "${first#*=}/build-ab" && timeout 240 ./tests/megakernel/detmoe_layer_test --gtest_filter="$AB_TESTS" \
      >"$OUT/tests-${first%%=*}.log" 2>&1; echo "tests ${first%%=*} ($AB_TESTS) exit $?" )
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]" "$OUT/tests-${first%%=*}.log" | head -20
fi
if [ -n "${AB_NCU:-}" ]; then
  for spec in $trees; do
    name=${spec%%=*}; dir=${spec#*=}
    timeout 240 ncu -k regex:layer_forward --launch-count 1 \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
      "$dir/build-ab/detmoe" verify --impl megakernel --shape "$AB_NCU" --forward-only --no-oracle >"$OUT/ncu-$name.log" 2>&1
    echo "ncu $name exit $?: $(grep -E 'gpu__time_duration|dram__bytes|lts__t_sector_hit' "$OUT/ncu-$name.log" | awk '{print $1, $(NF-1), $NF}' | tr '\n' ' ')"
  done
fi
for round in $(seq 1 "${AB_ROUNDS:-2}"); do
  for spec in $trees; do
    name=${spec%%=*}; dir=${spec#*=}
    timeout 200 "$dir/build-ab/perf/detmoe_perf_layer" --impls=megakernel --routings=balanced \
      --shapes="${AB_SHAPES:-gpt-oss-120b,mixtral-8x7b}" --timed=20 ${AB_BENCH_ARGS:-} \
      --benchmark_counters_tabular=true --benchmark_out="$OUT/ab-$name-$round.json" --benchmark_out_format=json \
      >"$OUT/ab-$name-$round.log" 2>&1
    echo "round $round $name (median ms, J/step): $(python3 -c '
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    print(b["name"].split("/iterations")[0], "%.3f" % b["median_ms"], "%.3f" % b.get("joules_per_step", 0), end="  ")
' "$OUT/ab-$name-$round.json" 2>&1)"
  done
done
