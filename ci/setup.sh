#!/usr/bin/env bash
# Installs what the build needs (Debian packages, only those missing; quiet when all are
# present), then configures and builds. Used by ci/test.sh, ci/accept.sh and CI.
#   DETMOE_BUILD_DIR  build folder (default: build)
#   DETMOE_CMAKE_ARGS extra CMake arguments (e.g. -DNCCL_ROOT=...)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DETMOE_BUILD_DIR:-$root/build}

packages=(cmake ninja-build g++ ccache pkg-config libgtest-dev libgmock-dev libbenchmark-dev librapidcheck-dev
          libcli11-dev nlohmann-json3-dev libfmt-dev libxxhash-dev
          chromium)  # headless browser for the tests/reports HTML check (skipped when absent)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "ci/setup.sh: installing ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The CUDA toolkit (nvcc, cuBLAS, NCCL) is not a Debian package here: it must be installed.
if ! command -v nvcc >/dev/null 2>&1; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH
  else echo "ci/setup.sh: nvcc not found (install the CUDA 13 toolkit under /usr/local/cuda)" >&2; exit 3; fi
fi

jobs=$(nproc)
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${DETMOE_CMAKE_ARGS:-} >"$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; exit 1; }
start=$(date +%s)
ninja -C "$build" -j"$jobs"
echo "ci/setup.sh: build took $(( $(date +%s) - start )) s on $jobs cores"
