#!/usr/bin/env bash
# `detmoe gate` refuses what it did not check:
#   - a baseline it cannot read strictly (unknown key, wrong type, empty list, bad number, not an
#     object, no check selected) is exit 2 naming the file, the key path and the value;
#   - a check that could not run (no hash file, no CUDA device, no benchmark binary, no usable
#     stored medians, a suite that never exits) is exit 3, a real failure exit 1 even when another
#     check could not run (both printed);
#   - a hung suite is killed with its process group at timeout_s;
#   - --report is written as the gate goes ("running") and marked "aborted" on SIGTERM.
#   gate_rules_test.sh <path to detmoe> <source dir>
set -u
detmoe=$1 src=$2
source "$(dirname "$0")/expect.sh"
has() {  # has <description> <regex>: the last command's output matches
  grep -Eq -- "$2" "$tmp/out" || { echo "FAIL: $1: output lacks /$2/"; cat "$tmp/out"; fail=1; }
}
S='"schema": "detmoe.gate-baseline/1"'
alive() {  # alive <pid>: running (a killed process may linger as a zombie until it is reaped)
  local st; st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  case $st in Z*) return 1 ;; esac
}
refused() {  # refused <description> <baseline JSON> <regex the message must match>
  printf '%s\n' "$2" >"$tmp/b.json"
  expect 2 "refused: $1" "$detmoe" gate --baseline "$tmp/b.json"
  has "$1: message names the file" "$tmp/b.json"
  has "$1: message names the key and value" "$3"
}

# One small oracle case, recorded, so golden checks take a moment.
python3 - "$src/golden/cases.json" "$tmp/cases.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["cases"] = [c for c in d["cases"] if c["name"] == "small-balanced"]  # k > 2: the plant changes bits
json.dump(d, open(sys.argv[2], "w"))
PY
"$detmoe" golden record --impl oracle --cases "$tmp/cases.json" --dir "$tmp/hashes" >/dev/null || { echo "FAIL: record"; exit 1; }
G='"golden": {"impls": ["oracle"], "cases": "cases.json", "hashes": "hashes"}'

# ---- strict baseline ----
refused "misspelt section" "{$S, \"goldne\": {\"impls\": [\"oracle\"]}}" 'goldne = .*unknown key'
refused "only the schema" "{$S}" 'selects no check'
refused "empty impls" "{$S, \"golden\": {\"impls\": []}}" 'golden.impls = \[\]: must not be empty'
refused "unknown key inside golden" "{$S, \"golden\": {\"impls\": [\"oracle\"], \"hash\": \"x\"}}" 'golden.hash = "x": unknown key'
refused "impls not a list" "{$S, \"golden\": {\"impls\": \"oracle\"}}" 'golden.impls = "oracle": must be a list'
refused "unknown impl" "{$S, \"golden\": {\"impls\": [\"orcale\"]}}" 'golden.impls\[0\] = "orcale": unknown implementation'
refused "misspelt accuracy case" "{$S, \"accuracy\": {\"impls\": [\"oracle\"], \"cases\": [\"small-balance\"]}}" 'accuracy.cases\[0\] = "small-balance"'
refused "empty accuracy cases" "{$S, \"accuracy\": {\"impls\": [\"oracle\"], \"cases\": []}}" 'accuracy.cases = \[\]'
refused "empty suites" "{$S, \"performance\": {\"suites\": []}}" 'performance.suites = \[\]'
suite='"binary": "b", "stored": "s.json"'
refused "repeats 0" "{$S, \"performance\": {\"suites\": [{$suite, \"repeats\": 0}]}}" 'performance.suites\[0\].repeats = 0'
refused "max_slowdown 10" "{$S, \"performance\": {\"suites\": [{$suite, \"max_slowdown\": 10}]}}" 'performance.suites\[0\].max_slowdown = 10'
refused "max_slowdown 0" "{$S, \"performance\": {\"suites\": [{$suite, \"max_slowdown\": 0}]}}" 'max_slowdown = 0: must be in \(0, 10\)'
refused "unknown suite key" "{$S, \"performance\": {\"suites\": [{$suite, \"repeat\": 3}]}}" 'performance.suites\[0\].repeat = 3: unknown key'
refused "suite without stored" "{$S, \"performance\": {\"suites\": [{\"binary\": \"b\"}]}}" 'performance.suites\[0\].stored = null: missing'
refused "an array" "[{$S}]" 'must be a JSON object'
refused "args not strings" "{$S, \"performance\": {\"suites\": [{$suite, \"args\": [1]}]}}" 'args\[0\] = 1: must be a string'
# The project's baselines stay valid (the GPU one cannot run here, but must not be refused).
for b in gate-baseline.json gate-baseline-gpu.json; do
  expect 0 "ci/$b is a valid baseline" "$detmoe" gate --baseline "$src/ci/$b" --validate-only
done
expect 2 "--validate-only still refuses" "$detmoe" gate --baseline "$tmp/b.json" --validate-only

# ---- could not run vs failed ----
printf '{%s, "golden": {"impls": ["oracle"], "cases": "cases.json", "hashes": "nowhere"}}\n' "$S" >"$tmp/b.json"
expect 3 "no hash file is could-not-run" "$detmoe" gate --baseline "$tmp/b.json"
has "says could not run" "^Skip golden/oracle .*could not run"
if ! nvidia-smi -L >/dev/null 2>&1; then
  printf '{%s, "golden": {"impls": ["reference"], "cases": "cases.json", "hashes": "hashes"}}\n' "$S" >"$tmp/b.json"
  expect 3 "GPU impl without a device is could-not-run" "$detmoe" gate --baseline "$tmp/b.json"
  has "says a CUDA device is needed" "needs a CUDA device"
fi

# A fake Google Benchmark binary: prints one benchmark whose time is $FAKE_MS (or hangs, fails).
cat >"$tmp/bench" <<'SH'
#!/bin/sh
case ${FAKE_MODE:-ok} in
  hang) sleep 300 & echo $! >"$FAKE_PIDFILE"; wait; exit 0 ;;
  crash) echo "bench: no GPU" >&2; exit 1 ;;
  garbage) echo "not json"; exit 0 ;;
esac
echo "{\"benchmarks\": [{\"name\": \"BM_layer/fwd_median\", \"run_name\": \"BM_layer/fwd\", \"run_type\": \"aggregate\", \"aggregate_name\": \"median\", \"real_time\": ${FAKE_MS:-100}}]}"
SH
chmod +x "$tmp/bench"
echo '{"benchmarks": [{"name": "BM_layer/fwd", "real_time": 100}]}' >"$tmp/stored.json"
echo '{"benchmarks": []}' >"$tmp/empty.json"
echo '{"benchmarks": [{"real_time": 100}]}' >"$tmp/noname.json"
perf() {  # perf <stored> <extra suite keys>: a baseline of the golden case and one suite
  printf '{%s, %s, "performance": {"suites": [{"binary": "%s", "stored": "%s", "repeats": 2%s}]}}\n' \
    "$S" "$G" "$tmp/bench" "$1" "${2:-}" >"$tmp/b.json"
}
perf stored.json
expect 0 "same speed passes" "$detmoe" gate --baseline "$tmp/b.json"
has "pass line counts recorded outputs" "^Pass golden/oracle/small-balanced +[0-9]+ recorded outputs bitwise equal"
FAKE_MS=200 expect 1 "slower in every repeat fails" "$detmoe" gate --baseline "$tmp/b.json"
FAKE_MODE=crash expect 3 "a crashing suite is could-not-run" "$detmoe" gate --baseline "$tmp/b.json"
has "names the exit and stderr" "exit 1 .*bench: no GPU"
FAKE_MODE=garbage expect 3 "no JSON from the suite is could-not-run" "$detmoe" gate --baseline "$tmp/b.json"
perf missing.json
expect 3 "missing stored medians are could-not-run" "$detmoe" gate --baseline "$tmp/b.json"
perf empty.json
expect 3 "empty stored medians are could-not-run" "$detmoe" gate --baseline "$tmp/b.json"
perf noname.json
expect 3 "a stored row without a name is could-not-run" "$detmoe" gate --baseline "$tmp/b.json"
printf '{%s, %s, "performance": {"suites": [{"binary": "%s", "stored": "stored.json"}]}}\n' "$S" "$G" "$tmp/no-such-bench" >"$tmp/b.json"
expect 3 "a missing benchmark binary is could-not-run" "$detmoe" gate --baseline "$tmp/b.json"
has "names the binary" "no-such-bench"
DETMOE_TEST_PLANT=combine-reversed expect 1 "wrong bits fail even when a suite could not run" "$detmoe" gate --baseline "$tmp/b.json"
has "the failure is printed" "^Fail golden/oracle/small-balanced"
has "the could-not-run is printed" "^Skip .*could not run: no benchmark binary"

# ---- a hung suite is killed with its process group ----
perf stored.json ', "timeout_s": 2'
start=$(date +%s)
FAKE_MODE=hang FAKE_PIDFILE=$tmp/pid expect 3 "a hung suite times out as could-not-run" "$detmoe" gate --baseline "$tmp/b.json"
has "says it timed out" "timed out after 2 s"
[ $(( $(date +%s) - start )) -lt 60 ] || { echo "FAIL: the hung suite took $(( $(date +%s) - start )) s"; fail=1; }
if [ -s "$tmp/pid" ] && alive "$(cat "$tmp/pid")"; then
  echo "FAIL: the suite's child (pid $(cat "$tmp/pid")) survived the timeout"; kill "$(cat "$tmp/pid")"; fail=1
else echo "ok: the suite's process group was killed"; fi

# ---- the report is written as the gate goes, and marked aborted on SIGTERM ----
rm -f "$tmp/pid"
perf stored.json ', "timeout_s": 120'
FAKE_MODE=hang FAKE_PIDFILE=$tmp/pid "$detmoe" gate --baseline "$tmp/b.json" --report "$tmp/run.json" >"$tmp/out" 2>&1 &
gate=$!
for _ in $(seq 100); do [ -s "$tmp/pid" ] && break; sleep 0.1; done
if "$detmoe" report validate "$tmp/run.json" >/dev/null 2>&1 && grep -q '"running"' "$tmp/run.json" \
   && grep -q 'golden/oracle/small-balanced' "$tmp/run.json"; then
  echo "ok: while the gate runs its report is valid, \"running\", with the checks done so far"
else echo "FAIL: report while running"; cat "$tmp/run.json" 2>/dev/null; fail=1; fi
kill -TERM $gate
wait $gate; rc=$?
[ $rc -eq 143 ] && echo "ok: SIGTERM ends the gate by that signal" || { echo "FAIL: gate after SIGTERM exit $rc, want 143"; cat "$tmp/out"; fail=1; }
if "$detmoe" report validate "$tmp/run.json" >/dev/null 2>&1 && grep -q '"aborted"' "$tmp/run.json"; then
  echo "ok: the report is marked aborted"
else echo "FAIL: report after SIGTERM"; cat "$tmp/run.json"; fail=1; fi
if [ -s "$tmp/pid" ] && alive "$(cat "$tmp/pid")"; then
  echo "FAIL: the suite's child survived the abort"; kill "$(cat "$tmp/pid")"; fail=1; fi
ls "$tmp" | grep -q '\.tmp' && { echo "FAIL: temporary files left: $(ls "$tmp")"; fail=1; }
exit $fail
