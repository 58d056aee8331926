#!/usr/bin/env bash
# A build moved or installed elsewhere finds its data, or says where it looked — it never reads
# or writes another tree by a compiled-in path. The detmoe binary is copied out of its build
# folder; `cmake --install` puts it under a prefix with its data.
#   data_paths_test.sh <path to detmoe> <source dir> <build dir>
set -u
detmoe=$1 src=$2 build=$3
source "$(dirname "$0")/expect.sh"
mkdir -p "$tmp/moved" "$tmp/elsewhere"
cp "$detmoe" "$tmp/moved/detmoe"
strings "$tmp/moved/detmoe" | grep -qF "$src/golden" && { echo "FAIL: the binary carries the source tree's path $src/golden"; fail=1; }
cd "$tmp/elsewhere" || exit 1
expect 3 "moved build outside any checkout: could not run" "$tmp/moved/detmoe" golden check --impl oracle --case tiny-balanced
grep -q "no data folder found" "$tmp/out" && grep -q "DETMOE_DATA_DIR" "$tmp/out" && grep -q "golden/cases.json" "$tmp/out" \
  || { echo "FAIL: the message does not say where it looked and how to fix it"; cat "$tmp/out"; fail=1; }
DETMOE_DATA_DIR=$src expect 0 "moved build with DETMOE_DATA_DIR" "$tmp/moved/detmoe" golden check --impl oracle --case tiny-balanced
(cd "$src" && "$tmp/moved/detmoe" golden check --impl oracle --case tiny-balanced) >"$tmp/out" 2>&1 \
  && echo "ok: moved build run from the checkout" || { echo "FAIL: moved build run from the checkout"; cat "$tmp/out"; fail=1; }
# A record by a moved build writes where it is told, not into the source tree.
before=$(cd "$src" && git status --porcelain golden 2>/dev/null)
DETMOE_DATA_DIR=$src expect 0 "record with --dir" "$tmp/moved/detmoe" golden record --impl oracle --case tiny-balanced --dir "$tmp/h"
[ -f "$tmp/h/oracle.cpu-x86_64.json" ] || { echo "FAIL: record did not write --dir"; fail=1; }
[ "$(cd "$src" && git status --porcelain golden 2>/dev/null)" = "$before" ] || { echo "FAIL: record touched the source tree"; fail=1; }
# Installed: bin/detmoe finds share/detmoe, from any working directory.
if cmake --install "$build" --prefix "$tmp/inst" >"$tmp/install.log" 2>&1; then
  expect 0 "installed detmoe finds its data" "$tmp/inst/bin/detmoe" golden check --impl oracle --case tiny-balanced
  expect 0 "installed gate with the installed CPU baseline" "$tmp/inst/bin/detmoe" gate --baseline "$tmp/inst/share/detmoe/ci/gate-baseline.json"
else
  echo "FAIL: cmake --install"; cat "$tmp/install.log"; fail=1
fi
exit $fail
