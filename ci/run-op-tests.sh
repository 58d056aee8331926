#!/usr/bin/env bash
# Runs each test of python/tests/test_op.py in its own process (a crash then names its test and
# the others still run), with faulthandler on. Prints one summary line per test.
#   PYTHONPATH=build/python ci/run-op-tests.sh PYTHON [unittest -k patterns...]
set -uo pipefail
py=${1:?python}; shift
cd "$(dirname "$0")/../python/tests"
names=$("$py" -c "
import unittest, test_op
for s in unittest.defaultTestLoader.loadTestsFromModule(test_op):
    for t in s: print(t.id())")
[ -n "$names" ] || { echo "ci/run-op-tests.sh: no tests found (is PYTHONPATH an absolute path to build/python?)"; exit 3; }
fails=0
for n in $names; do
  if [ $# -gt 0 ]; then m=0; for k in "$@"; do [[ $n == *$k* ]] && m=1; done; [ $m = 1 ] || continue; fi
  start=$(date +%s)
  out=$(timeout 900 "$py" -X faulthandler -m unittest -v "$n" 2>&1); rc=$?
  status=ok; [ $rc = 0 ] || { status="FAILED (exit $rc)"; fails=$((fails + 1)); }
  grep -q "skipped" <<<"$out" && [ $rc = 0 ] && status=skipped
  echo "$status $n ($(( $(date +%s) - start )) s)"
  [ $rc = 0 ] || echo "$out" | tail -40
  grep -E "^  " <<<"$out" | grep -v "^  File" | head -20
done
echo "op tests: $fails failed"
[ $fails = 0 ]
