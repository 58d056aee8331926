#!/usr/bin/env bash
# The README's test command: install, build from scratch if needed, run every test with CTest.
# GPU tests skip with their reason on a machine without a GPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DETMOE_BUILD_DIR:-$root/build}
# The PyTorch op is built and its CPU-side tests run against torch from PyPI (ci/torch-venv.sh)
# unless DETMOE_TORCH_PYTHON names another Python with torch, or DETMOE_TORCH_OP=0.
if [ "${DETMOE_TORCH_OP:-1}" != 0 ]; then
  if [ -z "${DETMOE_TORCH_PYTHON:-}" ]; then
    DETMOE_TORCH_PYTHON=$("$root/ci/torch-venv.sh") || {
      echo "ci/test.sh: PyTorch op NOT built: ci/torch-venv.sh could not install torch (see above)" >&2
      DETMOE_TORCH_PYTHON=""
    }
  fi
  [ -z "$DETMOE_TORCH_PYTHON" ] || export DETMOE_CMAKE_ARGS="${DETMOE_CMAKE_ARGS:-} -DDETMOE_TORCH_PYTHON=$DETMOE_TORCH_PYTHON"
fi
"$root/ci/setup.sh"
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 900 "$@"
