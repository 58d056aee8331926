#!/usr/bin/env bash
# The README's main job: build, then `detmoe accept` on whatever GPUs are present (a CPU-only
# result, saying which GPU stages were skipped and why, when there are none).
#   ci/accept.sh [--level 1|2|3] [--json FILE]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DETMOE_BUILD_DIR:-$root/build}
"$root/ci/setup.sh" >/dev/null
[ $# -gt 0 ] || set -- --level 1
# The report names the commit it ran.
export DETMOE_GIT_SHA=${DETMOE_GIT_SHA:-$(git -C "$root" rev-parse HEAD 2>/dev/null || true)}
exec "$build/detmoe" accept "$@"
