#!/usr/bin/env bash
# Configure + build on the GPU machine: ci/device-build.sh [BUILD_DIR] [ninja targets...]
# (BUILD_DIR defaults to $DETMOE_BUILD_DIR, else build-device; targets to $DETMOE_BUILD_TARGETS,
# else everything). Carry .devdeps (and optionally the build dir) with the device call. Usable
# as DETMOE_SETUP for ci/gpu-gate.sh and ci/bisect.sh there.
set -euo pipefail
source "$(dirname "$0")/device-env.sh"
build=${1:-${DETMOE_BUILD_DIR:-build-device}}; shift || true
case $build in /*) ;; *) build=$DETMOE_ROOT/$build ;; esac
[ $# -gt 0 ] || set -- ${DETMOE_BUILD_TARGETS:-}
cmake -S "$DETMOE_ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$DETMOE_ROOT/.devdeps/usr" \
  -DCMAKE_LIBRARY_PATH="$DETMOE_ROOT/.devdeps/usr/lib/x86_64-linux-gnu" \
  -DNCCL_ROOT="$DETMOE_NCCL_ROOT" ${DETMOE_CMAKE_ARGS:-} >/dev/null
ninja -C "$build" -j"$(nproc)" "$@"
