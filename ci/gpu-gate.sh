#!/usr/bin/env bash
# The GPU gate on a GPU node: builds (unless --no-build) and runs `detmoe gate` with
# ci/gate-baseline-gpu.json: golden bits of the oracle, the reference and the megakernel,
# accuracy against the oracle, and speed against stored medians.
#   ci/gpu-gate.sh [--no-build] [--build-dir DIR] [--baseline FILE] [other detmoe gate options]
# Exit: 0 pass, 1 regression (bits, accuracy or speed), 2 usage error, 3 could not run (no GPU,
# build failed, missing hashes or benchmarks). ci/bisect.sh --gpu maps these to git-bisect's codes.
# Builds with $DETMOE_SETUP (default ci/setup.sh; on the lent GPU machine ci/device-build.sh,
# which uses the carried .devdeps instead of apt-get).
set -u
here=$(cd "$(dirname "$0")" && pwd)
# The checkout whose data (golden cases, hashes) the gate uses: $DETMOE_DATA_DIR when the caller
# names it (ci/bisect.sh does, for the commit under test), else the one holding this script.
root=${DETMOE_DATA_DIR:-$(cd "$here/.." && pwd)}
build=${DETMOE_BUILD_DIR:-$root/build}
baseline=$root/ci/gate-baseline-gpu.json
do_build=1 gate_args=()
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --no-build) do_build=0 ;;
    --build-dir) [ $# -ge 2 ] || { echo "gpu-gate.sh: --build-dir needs a folder" >&2; exit 2; }; build=$2; shift ;;
    --baseline) [ $# -ge 2 ] || { echo "gpu-gate.sh: --baseline needs a file" >&2; exit 2; }; baseline=$2; shift ;;
    *) gate_args+=("$1") ;;
  esac
  shift
done
[ -f "$baseline" ] || { echo "gpu-gate.sh: baseline $baseline does not exist" >&2; exit 2; }
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-gate.sh: no usable GPU (nvidia-smi -L fails): could not run (exit 3)"
  exit 3
fi
if [ $do_build = 1 ]; then
  setup=${DETMOE_SETUP:-$root/ci/setup.sh}
  echo "gpu-gate.sh: building in $build with $setup"
  if ! DETMOE_BUILD_DIR=$build "$setup" >"$build.gpu-gate-build.log" 2>&1; then
    echo "gpu-gate.sh: build failed (see $build.gpu-gate-build.log): could not run (exit 3)"
    exit 3
  fi
fi
[ -x "$build/detmoe" ] || { echo "gpu-gate.sh: no $build/detmoe: could not run (exit 3)"; exit 3; }
DETMOE_DATA_DIR=$root "$build/detmoe" gate --baseline "$baseline" "${gate_args[@]}"
