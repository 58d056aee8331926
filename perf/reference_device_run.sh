#!/usr/bin/env bash
# Device calls for the reference layer (issue 3): GPU tests and fuzzers, mutation checks,
# `detmoe verify`, the benchmark table beside the PyTorch pipeline, compute-sanitizer.
# Logs and JSON go to $OUT (at most 8 files come back).
#
#   STAGES="tests verify bench sanitizer mutants" perf/reference_device_run.sh [BIN_DIR]
#
# Making BIN_DIR here (same x86-64 toolchain as the device's CUDA 13.0):
#   ninja -C build-ref row_exchange_test compare_test device_plan_test reference_layer_test \
#     reference_fuzz_test detmoe detmoe_perf_layer
#   mkdir -p out-ref/bin out-ref/lib; cp <those binaries> out-ref/bin/
#   cp -L /lib/x86_64-linux-gnu/{libbenchmark.so.1debian,libfmt.so.9,libxxhash.so.0} out-ref/lib/
#   tests/reference/make_mutants.py build-mut out-ref/mut      # optional, for the mutants stage
# and call the device with carry [".devdeps", "out-ref"].
#
# BIN_DIR holds prebuilt binaries (bin/), the shared libraries the device lacks (lib/) and,
# for the mutants stage, deliberately broken builds (mut/<mutant>/, made by building with one
# source edit each) that the GPU tests must catch. If the prebuilt binaries do not run there,
# the targets are built with ci/device-build.sh. Every step has a timeout: a hang is reported,
# never waited out.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ref-out}
mkdir -p "$OUT"
BIN=${1:-out-ref}
STAGES=${STAGES:-tests verify bench sanitizer mutants}
source ci/device-env.sh
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$LD_LIBRARY_PATH
S=$OUT/summary.log
log() { echo "$*" | tee -a "$S"; }
want() { [[ " $STAGES " == *" $1 "* ]]; }

declare -A X=(
  [row_exchange_test]=$BIN/bin/row_exchange_test [compare_test]=$BIN/bin/compare_test
  [device_plan_test]=$BIN/bin/device_plan_test [reference_layer_test]=$BIN/bin/reference_layer_test
  [reference_fuzz_test]=$BIN/bin/reference_fuzz_test [detmoe]=$BIN/bin/detmoe [perf]=$BIN/bin/detmoe_perf_layer)
if ! "${X[reference_layer_test]}" --gtest_list_tests >/dev/null 2>&1 || ! "${X[detmoe]}" --help >/dev/null 2>&1; then
  log "prebuilt binaries do not run here ($("${X[detmoe]}" --help 2>&1 | head -2 | tr '\n' ' ')); building"
  start=$(date +%s)
  ci/device-build.sh build-device row_exchange_test compare_test device_plan_test reference_layer_test \
    reference_fuzz_test detmoe detmoe_perf_layer > "$OUT/build.log" 2>&1 || { log "build failed"; tail -40 "$OUT/build.log"; exit 1; }
  log "build took $(( $(date +%s) - start )) s"
  D=build-device
  X=([row_exchange_test]=$D/tests/reference/row_exchange_test [compare_test]=$D/tests/reference/compare_test
     [device_plan_test]=$D/tests/reference/device_plan_test [reference_layer_test]=$D/tests/reference/reference_layer_test
     [reference_fuzz_test]=$D/fuzz/reference_fuzz_test [detmoe]=$D/detmoe [perf]=$D/perf/detmoe_perf_layer)
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv | tee -a "$S"

if want tests; then
  log "== tests (fuzz properties at 300 cases each)"
  for t in row_exchange_test compare_test device_plan_test reference_layer_test reference_fuzz_test; do
    start=$(date +%s)
    RC_PARAMS="max_success=300" timeout 150 "${X[$t]}" > /tmp/$t.log 2>&1
    rc=$?
    log "$t rc=$rc ($(( $(date +%s) - start )) s): $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]|^\[  SKIPPED \] [0-9]|OK, passed|Falsifiable' /tmp/$t.log | tr '\n' ' ')"
    grep -E '^\[  FAILED  \] [A-Z]' /tmp/$t.log | head -20 | tee -a "$S"
    { echo "===== $t rc=$rc"; grep -vE '^\[       OK \]|^\[ RUN      \]' /tmp/$t.log | head -c 150000; } >> "$OUT/tests.log"
  done
fi

if want mutants && [ -d "$BIN/mut" ]; then
  log "== mutants (each must be caught)"
  for d in "$BIN"/mut/*/; do
    m=$(basename "$d")
    t=reference_layer_test
    [[ $m == plan_* ]] && t=device_plan_test
    timeout 60 "$d/$t" > /tmp/mut_$m.log 2>&1; rc=$?
    RC_PARAMS="max_success=100" timeout 60 "$d/reference_fuzz_test" > /tmp/mutfuzz_$m.log 2>&1; frc=$?
    log "$m: $t rc=$rc, failed: $(grep -E '^\[  FAILED  \] [A-Z]' /tmp/mut_$m.log | sed 's/\[  FAILED  \] //' | tr '\n' ' ')"
    log "$m: fuzz rc=$frc: $(grep -E 'Falsifiable|OK, passed' /tmp/mutfuzz_$m.log | tr '\n' ' ')"
    { echo "===== $m / $t"; grep -vE '^\[       OK \]|^\[ RUN      \]' /tmp/mut_$m.log | head -c 30000;
      echo "===== $m / fuzz"; head -c 20000 /tmp/mutfuzz_$m.log; } >> "$OUT/mutants.log"
  done
fi

if want verify; then
  log "== verify"
  V=${X[detmoe]}
  {
    timeout 120 "$V" verify --shape small-shared; echo "rc=$?"
    timeout 120 "$V" verify --shape small --P 4 --routing zipf1 --grad-dtype bf16; echo "rc=$?"
    timeout 120 "$V" verify --shape small-shared --backend nccl --recompute-h; echo "rc=$?"
    timeout 120 "$V" verify --T 2048 --H 1024 --F 512 --E 32 --k 4 --routing hot:0.3; echo "rc=$?"
    timeout 120 "$V" verify --shape qwen3-30b-a3b --no-oracle; echo "rc=$?"
  } > "$OUT/verify.log" 2>&1
  grep -E "^verify|^(PASS|FAIL)$|^rc=|FAIL" "$OUT/verify.log" | tee -a "$S"
fi

if want bench; then
  log "== benchmarks"
  timeout 260 "${X[detmoe]}" bench --perf-binary "${X[perf]}" --script perf/torch_moe_pipeline.py \
    --json "$OUT/reference_layer_bench.json" > "$OUT/bench.log" 2>&1
  log "bench rc=$?"
  sed -n '/^reference layer vs PyTorch/,$p' "$OUT/bench.log" | tee -a "$S"
  timeout 100 "${X[perf]}" --shapes=qwen3-30b-a3b,gpt-oss-120b --routings=balanced --gemm=grouped,per-expert \
    --benchmark_out="$OUT/gemm_modes.json" --benchmark_out_format=json --benchmark_counters_tabular=true > /tmp/modes.log 2>&1
  log "gemm modes rc=$?"
  grep -E "^reference/" /tmp/modes.log | tee -a "$S"
fi

if want sanitizer; then
  log "== compute-sanitizer"
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 "${X[reference_layer_test]}" \
    --gtest_filter='Shapes/ReferenceVsOracle.*small_shared_balanced_fp32:ReferenceLayer.ForwardAndBackwardReplayFromACudaGraph:ReferenceLayer.BadRoutingGetsTheHostMessage' \
    > /tmp/memcheck.log 2>&1
  log "memcheck layer rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' /tmp/memcheck.log | tr '\n' ' ')"
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 "${X[device_plan_test]}" \
    --gtest_filter='DevicePlan.BadIds*:DevicePlan.Capacity*' > /tmp/memcheck_plan.log 2>&1
  log "memcheck plan rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' /tmp/memcheck_plan.log | tr '\n' ' ')"
  timeout 60 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 1 "${X[device_plan_test]}" \
    --gtest_filter='DevicePlan.Capacity*' > /tmp/racecheck_plan.log 2>&1
  log "racecheck plan rc=$? $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' /tmp/racecheck_plan.log | tr '\n' ' ')"
  { for f in memcheck memcheck_plan racecheck_plan; do echo "===== $f"; head -c 100000 /tmp/$f.log; done; } > "$OUT/sanitizer.log"
fi
log "== done"
