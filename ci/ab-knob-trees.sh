#!/usr/bin/env bash
# Lays out A/B trees for ci/device-ab-prebuilt.sh that time one build under different
# detmoe_perf_layer flags (speed knobs, which change no bits): BIN/<base> gets the build's detmoe,
# detmoe_perf_layer and detmoe_layer_test (stripped), and each NAME=FLAGS pair a tree BIN/NAME
# whose detmoe_perf_layer runs BIN/<base>'s with FLAGS first. Runs on the CPU machine.
#   ci/ab-knob-trees.sh build .abbin auto 'gu=--wgrad-launch=gate-up-later' 'fused=--wgrad-launch=fused'
# then: AB_NAMES='auto gu fused' bash ci/device-ab-prebuilt.sh (carry .devdeps .abbin).
set -euo pipefail
build=${1:?build dir}; bin=${2:?tree dir}; base=${3:?base tree name}; shift 3
mkdir -p "$bin/$base" "$bin/lib"
cp "$build/detmoe" "$build/perf/detmoe_perf_layer" "$(find "$build" -name detmoe_layer_test -type f | head -1)" "$bin/$base/"
strip "$bin/$base"/* 2>/dev/null || true
# libbenchmark is not in .devdeps: the perf binary finds it here (device-ab-prebuilt.sh's LD_LIBRARY_PATH).
cp /lib/x86_64-linux-gnu/libbenchmark.so.1* "$bin/lib/" 2>/dev/null || true
for pair in "$@"; do
  name=${pair%%=*}; flags=${pair#*=}
  mkdir -p "$bin/$name"
  printf '#!/bin/sh\nexec "$(dirname "$0")/../%s/detmoe_perf_layer" %s "$@"\n' "$base" "$flags" >"$bin/$name/detmoe_perf_layer"
  chmod +x "$bin/$name/detmoe_perf_layer"
done
echo "trees in $bin: $base $(for p in "$@"; do printf '%s ' "${p%%=*}"; done)"
