#!/usr/bin/env bash
# `detmoe fuzz` end to end on the CPU oracle (against itself): a clean campaign passes and writes
# a valid run report; a planted nondeterminism (DETMOE_TEST_PLANT=fuzz-mismatch: a rerun's first
# output differs for more than 37 tokens) is found, shrunk, reported, and its replay command
# fails again; a campaign continued with --start draws the same problems; usage and
# could-not-run exits.
#   fuzz_cli_test.sh path/to/detmoe
set -u
detmoe=${1:?detmoe binary}
source "$(dirname "$0")/expect.sh"
small=(--impl oracle --against oracle --max-tokens 120 --max-experts 16 --max-hidden 128 --max-intermediate 128 --max-shared 64)

expect 0 "a clean campaign passes" "$detmoe" fuzz "${small[@]}" --problems 40 --seed 3 --report "$tmp/clean.json"
grep -q "fuzz PASS: 40 problems, 40 passed, 0 failed" "$tmp/out" || { echo "FAIL: summary line"; cat "$tmp/out"; fail=1; }
expect 0 "its report validates" "$detmoe" report render "$tmp/clean.json" -o "$tmp/clean.html"
python3 - "$tmp/clean.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["run"]["command"] == "fuzz" and d["run"]["state"] == "finished", d["run"]
names = [c["name"] for c in d["checks"]]
assert names == [f"fuzz/{i}" for i in range(40)], names[:5]
assert all(c["verdict"] == "Pass" for c in d["checks"])
print("ok: report has one passing check per problem")
PY

expect 0 "a continued campaign draws the same problems" "$detmoe" fuzz "${small[@]}" --problems 5 --start 10 --seed 3 --report "$tmp/cont.json"
python3 - "$tmp/clean.json" "$tmp/cont.json" <<'PY' || fail=1
import json, sys
a = {c["name"]: c["detail"] for c in json.load(open(sys.argv[1]))["checks"]}
b = {c["name"]: c["detail"] for c in json.load(open(sys.argv[2]))["checks"]}
assert sorted(b) == [f"fuzz/{i}" for i in range(10, 15)], sorted(b)
assert all(a[n] == b[n] for n in b), [(a[n], b[n]) for n in b if a[n] != b[n]]
print("ok: problems 10..14 are the same problems")
PY

DETMOE_TEST_PLANT=fuzz-mismatch expect 1 "a planted nondeterminism fails the campaign" \
  "$detmoe" fuzz "${small[@]}" --problems 20 --seed 4 --report "$tmp/bad.json"
for want in "FAIL problem" "D0: out differs on a rerun" "shrunk to:" "replay the problem: detmoe fuzz --impl oracle --against oracle --seed 4 --start"; do
  grep -q -- "$want" "$tmp/out" || { echo "FAIL: missing '$want'"; cat "$tmp/out"; fail=1; }
done
replay=$(grep -m1 -o "replay the problem: detmoe fuzz .*" "$tmp/out" | sed 's/^replay the problem: detmoe //')
python3 - "$tmp/bad.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
bad = [c for c in d["checks"] if c["verdict"] == "Fail"]
assert bad and "shrunk to" in bad[0]["detail"] and "replay:" in bad[0]["detail"], bad[:1]
print(f"ok: the report names {len(bad)} failing problems with their shrunk form and replay")
PY
# shellcheck disable=SC2086
DETMOE_TEST_PLANT=fuzz-mismatch expect 1 "the replay command fails again" "$detmoe" $replay
# shellcheck disable=SC2086
expect 0 "and passes without the plant" "$detmoe" $replay

expect 2 "neither --problems nor --minutes is a usage error" "$detmoe" fuzz --impl oracle --against oracle
grep -q "give --problems N or --minutes M" "$tmp/out" || { echo "FAIL: usage message"; cat "$tmp/out"; fail=1; }
expect 2 "an unknown implementation is named" "$detmoe" fuzz --impl nosuch --problems 1
if ! command -v nvidia-smi >/dev/null 2>&1; then
  expect 3 "a GPU implementation without a GPU could not run" "$detmoe" fuzz --impl reference --against oracle --problems 1
fi
exit $fail
