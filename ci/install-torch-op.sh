#!/usr/bin/env bash
# Builds the PyTorch op against PYTHON's torch and installs the `detmoe` package into that
# Python environment (its site-packages), replacing an earlier install.
#   ci/install-torch-op.sh /path/to/python
#   DETMOE_BUILD_DIR  build folder (default build/)
#   DETMOE_SETUP      configure+build command (default ci/setup.sh, which installs Debian packages;
#                     on the GPU machine: DETMOE_SETUP="ci/device-build.sh build-device" with
#                     DETMOE_BUILD_DIR=build-device)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${1:?usage: ci/install-torch-op.sh /path/to/python (a Python that imports torch)}
"$py" -c "import torch" || { echo "ci/install-torch-op.sh: $py cannot import torch" >&2; exit 3; }
build=${DETMOE_BUILD_DIR:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
export DETMOE_CMAKE_ARGS="${DETMOE_CMAKE_ARGS:-} -DDETMOE_TORCH_PYTHON=$py"
${DETMOE_SETUP:-$root/ci/setup.sh}
[ -f "$build/python/detmoe/_detmoe_ops.so" ] || { echo "ci/install-torch-op.sh: $build/python/detmoe/_detmoe_ops.so was not built" >&2; exit 1; }
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -rf "$site/detmoe"
cp -r "$build/python/detmoe" "$site/detmoe"
rm -rf "$site/detmoe/__pycache__"
(cd / && "$py" -c "import detmoe; print('ci/install-torch-op.sh: installed', detmoe.__file__)")
