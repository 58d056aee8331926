#!/usr/bin/env bash
# One device call that checks what a session changed without a GPU (the 2026-12-03 session ran
# out of device time): the CTest GPU tests, the PyTorch op's tests, verify through the seam with
# its run report, golden checks through the registry, and a short fuzz campaign of the megakernel
# against the reference. Logs and reports go to $OUT (at most 8 files come back).
#   OUT=dir [FUZZ_MINUTES=M | CALL_SECONDS=570] [FUZZ_SEED=1 FUZZ_START=0 FUZZ_PROBLEMS=10000 FUZZ_SHARDS=8] \
#     ci/device-check-session.sh
# Without FUZZ_MINUTES the fuzz campaign (ci/device-fuzz-campaign.sh) gets what is left of
# CALL_SECONDS (one device call).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$root/out-device}
mkdir -p "$OUT"
source "$root/ci/device-env.sh"
PY=${DETMOE_TORCH_PYTHON:-/opt/torch/.venv/bin/python}
build=$root/build-device
step() { echo; echo "=== $* ($(date +%T))"; }
step build
DETMOE_CMAKE_ARGS="-DDETMOE_TORCH_PYTHON=$PY" "$root/ci/device-build.sh" build-device 2>&1 | tail -3
cd "$build" || exit 3
step "ctest (all but the long property and fuzz runs)"
ctest -j4 --timeout 600 -E "MegakernelProperty|MegakernelBackwardProperty|ReferenceFuzz|LayerFuzz|torch_op" > "$OUT/ctest.log" 2>&1
echo "ctest exit $?"; grep -E "tests passed|\(Failed\)|\*\*\*" "$OUT/ctest.log" | head -20
step "op tests"
PYTHONPATH=$build/python DETMOE_BINARY=$build/detmoe DETMOE_SOURCE_DIR=$root "$root/ci/run-op-tests.sh" "$PY" \
  > "$OUT/op-tests.log" 2>&1
echo "op tests exit $?"; grep -E "^(ok|skipped|FAILED)|op tests:" "$OUT/op-tests.log"
step "verify through the seam, with run reports"
./detmoe verify --impl reference --shape small --routing zipf1 --P 4 --json "$OUT/verify-reference.json" | tail -2
./detmoe verify --impl megakernel --shape small --routing hot:0.3 --json "$OUT/verify-megakernel.json" | tail -2
step "golden through the registry"
./detmoe golden check --impl reference | tail -1
./detmoe golden check --impl megakernel | tail -1
step "fuzz campaign: the megakernel against the reference, in shards"
minutes=${FUZZ_MINUTES:-$(( (${CALL_SECONDS:-570} - SECONDS - 30) / 60 ))}
[ "$minutes" -ge 1 ] 2>/dev/null || minutes=1
OUT=$OUT BIN=$build/detmoe SEED=${FUZZ_SEED:-1} START=${FUZZ_START:-0} PROBLEMS=${FUZZ_PROBLEMS:-10000} \
  SHARDS=${FUZZ_SHARDS:-8} MINUTES=$minutes "$root/ci/device-fuzz-campaign.sh"
echo "campaign exit $?"
step done
