#!/usr/bin/env bash
# For `git bisect run ci/bisect.sh [gate options]`: builds the checked-out commit and runs the
# gate. Exit codes follow git-bisect(1):
#   0   good (the gate passed)
#   1   bad  (the gate found changed bits, an accuracy or a speed regression)
#   125 skip (this commit does not build, or the GPU/driver itself is unhealthy, so the commit
#            cannot be judged: never blame a commit for a broken build tree or device)
# Gate options default to `--baseline ci/gate-baseline.json`; copy this script outside the work
# tree before `git bisect start` if older commits lack it (git bisect run /tmp/bisect.sh).
#   DETMOE_BISECT_BUILD  build folder (default: build-bisect, kept between steps for ccache)
set -u
root=$(git rev-parse --show-toplevel 2>/dev/null) || { echo "bisect.sh: not in a git work tree" >&2; exit 125; }
build=${DETMOE_BISECT_BUILD:-$root/build-bisect}
sha=$(git -C "$root" rev-parse --short HEAD)
log=$build.log
mkdir -p "$(dirname "$log")"

echo "bisect.sh: $sha: building"
if ! DETMOE_BUILD_DIR=$build "$root/ci/setup.sh" >"$log" 2>&1; then
  echo "bisect.sh: $sha: build failed (skip, exit 125); see $log"
  exit 125
fi
detmoe=$build/detmoe
[ -x "$detmoe" ] || { echo "bisect.sh: $sha: no detmoe binary (skip)"; exit 125; }

# Device health: when a GPU is expected but the driver is missing or the device reports errors,
# the commit cannot be judged.
if [ "${DETMOE_BISECT_REQUIRE_GPU:-0}" = 1 ] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "bisect.sh: $sha: GPU required but nvidia-smi fails (skip)"
  exit 125
fi

[ $# -gt 0 ] || set -- --baseline "$root/ci/gate-baseline.json"
"$detmoe" gate "$@"
rc=$?
case $rc in
  0) echo "bisect.sh: $sha: good"; exit 0 ;;
  1) echo "bisect.sh: $sha: bad"; exit 1 ;;
  *) echo "bisect.sh: $sha: gate could not run (exit $rc): skip"; exit 125 ;;
esac
