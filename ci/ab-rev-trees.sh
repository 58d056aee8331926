#!/usr/bin/env bash
# Lays out A/B trees for ci/device-ab-prebuilt.sh from git revisions (kernel changes; for speed
# knobs of one build see ci/ab-knob-trees.sh): each NAME=REV gets a worktree under
# ${AB_WORK:-/tmp/detmoe-ab}/NAME, a Release build of the three binaries an A/B call runs (detmoe,
# detmoe_perf_layer, detmoe_layer_test; ccache shares the unchanged objects) and BIN/NAME.
# Runs on the CPU machine after ci/setup.sh (packages, nvcc).
#   ci/ab-rev-trees.sh .abbin staged=staged-h base=main
# then: AB_NAMES='staged base' bash ci/device-ab-prebuilt.sh (carry .devdeps .abbin).
set -euo pipefail
bin=${1:?tree dir}; shift
root=$(git rev-parse --show-toplevel)
work=${AB_WORK:-/tmp/detmoe-ab}
command -v nvcc >/dev/null 2>&1 || export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$work"
git -C "$root" worktree prune  # entries whose folders a reboot removed
for pair in "$@"; do
  name=${pair%%=*}; rev=${pair#*=}
  tree=$work/$name
  git -C "$root" worktree remove --force "$tree" >/dev/null 2>&1 || rm -rf "$tree"
  git -C "$root" worktree add -q --detach "$tree" "$rev"
  cmake -S "$tree" -B "$tree/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$tree/configure.log" 2>&1 \
    || { cat "$tree/configure.log"; exit 1; }
  ninja -C "$tree/build" detmoe detmoe_perf_layer detmoe_layer_test >"$tree/build.log" 2>&1 \
    || { tail -30 "$tree/build.log"; exit 1; }
  bash "$root/ci/ab-knob-trees.sh" "$tree/build" "$bin" "$name" >/dev/null
  echo "$name = $rev ($(git -C "$tree" rev-parse --short HEAD)) in $bin/$name"
done
