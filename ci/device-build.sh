#!/usr/bin/env bash
# Configure + build on the GPU machine: ci/device-build.sh [BUILD_DIR] [ninja targets...]
# Carry .devdeps (and optionally the build dir) with the device call.
set -euo pipefail
source "$(dirname "$0")/device-env.sh"
build=${1:-build-device}; shift || true
cmake -S "$DETMOE_ROOT" -B "$DETMOE_ROOT/$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$DETMOE_ROOT/.devdeps/usr" \
  -DCMAKE_LIBRARY_PATH="$DETMOE_ROOT/.devdeps/usr/lib/x86_64-linux-gnu" \
  -DNCCL_ROOT="$DETMOE_NCCL_ROOT" >/dev/null
ninja -C "$DETMOE_ROOT/$build" -j"$(nproc)" "$@"
