#!/usr/bin/env bash
# For `git bisect run ci/bisect.sh [--gpu] [--baseline FILE] [--report FILE]`: builds the checked-out commit and
# runs `detmoe gate` on it. Exit codes follow git-bisect(1):
#   0    good  (the gate passed)
#   1    bad   (the gate found changed bits, an accuracy or a speed regression)
#   125  skip  (this commit does not build, or the gate could not run here: no GPU, no hash file,
#               no benchmark: never blame a commit for the build tree or the device)
#   129  usage error (bad option, missing baseline file): git aborts the bisect instead of
#               skipping every commit
set -u
usage() {
  cat <<'EOF'
usage: git bisect run ci/bisect.sh [--gpu] [--baseline FILE] [--report FILE]
       ci/bisect.sh --help

Builds the checked-out commit (folder $DETMOE_BISECT_BUILD, default <checkout>/build-bisect,
kept between steps for ccache; with $DETMOE_SETUP, default ci/setup.sh) and runs `detmoe gate`
(with --gpu: ci/gpu-gate.sh, found next to this script).
  --gpu            GPU gate: baseline ci/gate-baseline-gpu.json, and a GPU is required (a commit
                   is skipped, not blamed, when nvidia-smi fails)
  --baseline FILE  gate baseline (default ci/gate-baseline.json, or the GPU one with --gpu); a
                   relative FILE is taken from the directory bisect was started in.
  --report FILE    passed to `detmoe gate` (a run report per step); it never drops the default
                   baseline. Any other option is a usage error.
Copy this script and the baseline outside the work tree before `git bisect start` if older
commits lack them (git bisect run /tmp/bisect.sh --baseline /tmp/baseline.json).
Exit: 0 good, 1 bad, 125 skip (cannot build or could not run), 129 usage error (aborts bisect).
EOF
}
usage_error() { echo "bisect.sh: $1 (see ci/bisect.sh --help)" >&2; exit 129; }

gpu=0 baseline="" gate_args=()
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --gpu) gpu=1 ;;
    --baseline) [ $# -ge 2 ] || usage_error "--baseline needs a file"; baseline=$2; shift ;;
    --baseline=*) baseline=${1#--baseline=} ;;
    --report|--report=*) gate_args+=("$1"); [ "$1" = --report ] && { [ $# -ge 2 ] || usage_error "--report needs a file"; gate_args+=("$2"); shift; } ;;
    *) usage_error "unknown option '$1'" ;;
  esac
  shift
done

root=$(git rev-parse --show-toplevel 2>/dev/null) || usage_error "not in a git work tree"
if [ -z "$baseline" ]; then
  baseline=$root/ci/gate-baseline.json
  [ $gpu = 1 ] && baseline=$root/ci/gate-baseline-gpu.json
fi
case $baseline in /*) ;; *) baseline=$PWD/$baseline ;; esac
[ -f "$baseline" ] || usage_error "baseline $baseline does not exist"

build=${DETMOE_BISECT_BUILD:-$root/build-bisect}
sha=$(git -C "$root" rev-parse --short HEAD)
log=$build.log
mkdir -p "$(dirname "$log")"

if [ $gpu = 1 ] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "bisect.sh: $sha: --gpu but nvidia-smi fails: the device cannot judge this commit (skip, 125)"
  exit 125
fi

echo "bisect.sh: $sha: building in $build"
if ! DETMOE_BUILD_DIR=$build "${DETMOE_SETUP:-$root/ci/setup.sh}" >"$log" 2>&1; then
  echo "bisect.sh: $sha: build failed (skip, exit 125); see $log"
  exit 125
fi
detmoe=$build/detmoe
[ -x "$detmoe" ] || { echo "bisect.sh: $sha: no detmoe binary (skip, 125)"; exit 125; }

if [ $gpu = 1 ]; then
  # The GPU gate script next to this one (a copy outside the tree keeps working on old commits).
  DETMOE_DATA_DIR=$root "$(cd "$(dirname "$0")" && pwd)/gpu-gate.sh" --no-build --build-dir "$build" --baseline "$baseline" "${gate_args[@]}"
else
  DETMOE_DATA_DIR=$root "$detmoe" gate --baseline "$baseline" "${gate_args[@]}"
fi
rc=$?
case $rc in
  0) echo "bisect.sh: $sha: good"; exit 0 ;;
  1) echo "bisect.sh: $sha: bad"; exit 1 ;;
  2) echo "bisect.sh: $sha: the gate refused its options or baseline (usage error, 129: aborting)"; exit 129 ;;
  *) echo "bisect.sh: $sha: gate could not run (exit $rc): skip (125)"; exit 125 ;;
esac
