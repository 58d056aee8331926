#!/usr/bin/env bash
# One device call for the PyTorch op: build it against the GPU machine's torch venv, run its
# tests, the training example (reruns and SM counts, with the torch._grouped_mm pipeline's
# reruns), and time it from Python beside the pipeline and the C++ benchmark of the same path.
#   OUT=dir STAGES="build tests example perf" ci/device-torch-op.sh
# Logs and JSON go to $OUT (op.log, tests.log, example.log, op-bench.json, layer-bench.json).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$root/out-device}
mkdir -p "$OUT"
source "$root/ci/device-env.sh"
STAGES=${STAGES:-"build tests example perf"}
PY=${DETMOE_TORCH_PYTHON:-/opt/torch/.venv/bin/python}
build=$root/build-device
has() { [[ " $STAGES " == *" $1 "* ]]; }
step() { echo; echo "=== $* ($(date +%T))"; }
export PYTHONPATH=$build/python DETMOE_BINARY=$build/detmoe DETMOE_SOURCE_DIR=$root
if has build; then
  step build
  DETMOE_CMAKE_ARGS="-DDETMOE_TORCH_PYTHON=$PY" "$root/ci/device-build.sh" build-device detmoe detmoe_torch \
    detmoe_perf_layer 2>&1 | tail -5
fi
if has tests; then
  step "op tests"
  "$root/ci/run-op-tests.sh" "$PY" ${TESTS:-} > "$OUT/tests.log" 2>&1
  echo "tests exit $?"; grep -E "^(ok|skipped|FAILED)|op tests:" "$OUT/tests.log"
fi
if has gdb; then
  step "native backtrace of one test (GDB_TEST)"
  (cd "$root/python/tests" && timeout 300 gdb -q -batch -ex run -ex bt --args "$PY" -m unittest "$GDB_TEST" 2>&1 | grep -v "^\[New Thread\|^\[Thread" | tail -40)
fi
if has example; then
  step "training example: reruns, SM counts, the pipeline's reruns"
  for sms in 0 0 66 17; do
    extra=--no-pipeline; [ "$sms" = 0 ] && [ ! -f "$OUT/.pipeline-done" ] && { extra=""; touch "$OUT/.pipeline-done"; }
    timeout 600 "$PY" "$root/examples/train_tiny_moe.py" --steps 50 --num-sms $sms $extra
  done > "$OUT/example.log" 2>&1
  rm -f "$OUT/.pipeline-done"
  cat "$OUT/example.log"
fi
if has perf; then
  step "perf: the op from Python beside the pipeline; the C++ benchmark of the same paths"
  timeout 900 "$PY" "$root/perf/torch_op_bench.py" --timed ${TIMED:-20} --json "$OUT/op-bench.json" ${BENCH_ARGS:-}
  # bf16 weight gradients: what the op computes for the bf16 weights it is timed with (like for like)
  timeout 900 "$build/perf/detmoe_perf_layer" --impls=reference,megakernel --timed=${TIMED:-20} --energy-window=0 --grad-dtype=bf16 \
    --benchmark_format=json --benchmark_out="$OUT/layer-bench.json" ${LAYER_ARGS:-} > /dev/null
  echo "layer bench exit $?"
  "$PY" "$root/perf/torch_op_report.py" "$OUT/op-bench.json" "$OUT/layer-bench.json"
fi
step done
