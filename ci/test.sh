#!/usr/bin/env bash
# The README's test command: install, build from scratch if needed, run every test with CTest.
# GPU tests skip with their reason on a machine without a GPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DETMOE_BUILD_DIR:-$root/build}
"$root/ci/setup.sh"
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 900 "$@"
