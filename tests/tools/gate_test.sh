#!/usr/bin/env bash
# The gate catches a planted change of bits (DETMOE_TEST_PLANT=combine-reversed: the combine sums
# slots in reverse, in fp32) and names the first differing element with both values; without
# the plant it passes. Also: its exit codes, and bisect.sh's (good 0, bad 1, unbuildable 125).
#   gate_test.sh <path to detmoe> <source dir>
set -u
detmoe=$1 src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
"$detmoe" golden record --impl oracle --dir "$tmp/hashes" --store "$tmp/store" --case small-balanced --case small-shared >/dev/null || { echo "FAIL: record"; exit 1; }
cat >"$tmp/baseline.json" <<JSON
{"schema": "detmoe.gate-baseline/1",
 "golden": {"impls": ["oracle"], "hashes": "hashes", "store": "store"}}
JSON
# Only the recorded cases: a case file with just those two.
python3 - "$src/golden/cases.json" "$tmp/cases.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["cases"] = [c for c in d["cases"] if c["name"] in ("small-balanced", "small-shared")]
json.dump(d, open(sys.argv[2], "w"))
PY
sed -i 's|"hashes": "hashes"|"hashes": "hashes", "cases": "cases.json"|' "$tmp/baseline.json"

"$detmoe" gate --baseline "$tmp/baseline.json" --report "$tmp/run.json" >"$tmp/clean.out" 2>&1
rc=$?
if [ $rc -ne 0 ]; then echo "FAIL: clean gate exit $rc"; cat "$tmp/clean.out"; fail=1; else echo "ok: clean gate passes"; fi
"$detmoe" report validate "$tmp/run.json" >/dev/null 2>&1 || { echo "FAIL: gate report does not validate"; fail=1; }

DETMOE_TEST_PLANT=combine-reversed "$detmoe" gate --baseline "$tmp/baseline.json" >"$tmp/planted.out" 2>&1
rc=$?
if [ $rc -ne 1 ]; then echo "FAIL: planted gate exit $rc, want 1"; cat "$tmp/planted.out"; fail=1; fi
if grep -q "out: first differing element \[" "$tmp/planted.out" && grep -q "recorded .*, now " "$tmp/planted.out"; then
  echo "ok: planted change caught: $(grep -m1 -o 'out: first differing element[^;]*' "$tmp/planted.out")"
else echo "FAIL: planted change not reported with its element"; cat "$tmp/planted.out"; fail=1; fi
grep -q "d_x" "$tmp/planted.out" && { echo "FAIL: the plant only touches out, but d_x was reported"; fail=1; }

"$detmoe" gate --baseline "$tmp/missing.json" >/dev/null 2>&1; rc=$?
[ $rc -eq 3 ] && echo "ok: missing baseline is exit 3" || { echo "FAIL: missing baseline exit $rc"; fail=1; }
echo '{"schema": "nope"}' >"$tmp/bad.json"
"$detmoe" gate --baseline "$tmp/bad.json" >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] && echo "ok: wrong schema is exit 2" || { echo "FAIL: wrong schema exit $rc"; fail=1; }
exit $fail
