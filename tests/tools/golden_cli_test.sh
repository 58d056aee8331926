#!/usr/bin/env bash
# `detmoe golden record|check` refuse what they did not check:
#   record --case merges into the hash file (other cases kept, cases.json order), a record of all
#   cases drops the cases cases.json no longer lists and says so, an unknown --case is exit 2;
#   check fails a case recorded with no outputs or without one of the outputs produced (exit 1),
#   says how many recorded outputs matched, and is exit 3 when it could not run (no hash file,
#   no CUDA device for a GPU path).
#   golden_cli_test.sh <path to detmoe> <source dir>
set -u
detmoe=$1 src=$2
source "$(dirname "$0")/expect.sh"
has() {  # has <description> <regex>: the last command's output matches
  grep -Eq "$2" "$tmp/out" || { echo "FAIL: $1: output lacks /$2/"; cat "$tmp/out"; fail=1; }
}
cases_in() { python3 -c 'import json,sys; print(" ".join(c["name"] for c in json.load(open(sys.argv[1]))["cases"]))' "$1"; }

# Two small cases only (and one the hash file will hold but cases.json will not).
python3 - "$src/golden/cases.json" "$tmp/cases.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["cases"] = [c for c in d["cases"] if c["name"] in ("tiny-balanced", "tiny-bf16-grads")]
d["cases"][1]["impls"] = ["oracle", "reference"]  # not a megakernel case
json.dump(d, open(sys.argv[2], "w"))
PY
rec() { "$detmoe" golden record --impl oracle --cases "$tmp/cases.json" --dir "$tmp/h" "$@"; }
chk() { "$detmoe" golden check --impl oracle --cases "$tmp/cases.json" --dir "$tmp/h" "$@"; }

expect 0 "record the second case alone" rec --case tiny-bf16-grads
file=$(echo "$tmp"/h/oracle.*.json)
expect 0 "record the first case alone" rec --case tiny-balanced
got=$(cases_in "$file")
[ "$got" = "tiny-balanced tiny-bf16-grads" ] && echo "ok: record --case merges, in cases.json order" \
  || { echo "FAIL: after two single-case records the file holds [$got], want [tiny-balanced tiny-bf16-grads]"; fail=1; }
expect 2 "record of an unknown --case" rec --case tiny-balancd
has "unknown --case is named" "tiny-balancd"
expect 2 "check of an unknown --case" chk --case no-such-case
has "unknown --case is named" "no-such-case"
expect 2 "--case that is not a case of --impl" "$detmoe" golden check --impl megakernel --cases "$tmp/cases.json" --dir "$tmp/h" --case tiny-bf16-grads
has "the case and impl are named" "tiny-bf16-grads is not a case of .* for --impl megakernel"

expect 0 "check passes" chk
has "pass line counts recorded outputs" "^PASS tiny-balanced +[0-9]+ recorded outputs bitwise equal"

# A stale case (no longer in cases.json): a selective record keeps it, a full record drops it.
python3 - "$file" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
gone = json.loads(json.dumps(d["cases"][0])); gone["name"] = "gone-case"
d["cases"].append(gone)
json.dump(d, open(sys.argv[1], "w"))
PY
expect 0 "selective record with a stale case" rec --case tiny-balanced
has "the stale case is kept and named" "kept +gone-case"
[ "$(cases_in "$file")" = "tiny-balanced tiny-bf16-grads gone-case" ] && echo "ok: selective record keeps the stale case" \
  || { echo "FAIL: selective record: file holds [$(cases_in "$file")]"; fail=1; }
expect 0 "full record" rec
has "the dropped case is named" "dropped +gone-case"
[ "$(cases_in "$file")" = "tiny-balanced tiny-bf16-grads" ] && echo "ok: full record drops the stale case" \
  || { echo "FAIL: full record: file holds [$(cases_in "$file")]"; fail=1; }

# Records that lack outputs must fail: none at all, or one of those produced.
cp "$file" "$tmp/good.json"
python3 - "$file" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["cases"][0]["outputs"] = []
d["cases"][1]["outputs"] = [o for o in d["cases"][1]["outputs"] if o["name"] != "d_x"]
json.dump(d, open(sys.argv[1], "w"))
PY
expect 1 "check fails records that lack outputs" chk
has "zero recorded outputs fail" "^FAIL tiny-balanced .*no outputs"
has "an unrecorded output fails, named" "^FAIL tiny-bf16-grads +d_x +output was produced but is not recorded"
has "the summary counts them" "0 passed, 2 failed"
cp "$tmp/good.json" "$file"

# Could not run: exit 3, not 1.
expect 3 "check without a hash file" "$detmoe" golden check --impl oracle --cases "$tmp/cases.json" --dir "$tmp/nothing"
has "says it could not run" "could not run"
if ! nvidia-smi -L >/dev/null 2>&1; then
  expect 3 "GPU reference without a CUDA device" "$detmoe" golden check --impl reference --cases "$tmp/cases.json" --dir "$tmp/h"
  has "says a CUDA device is needed" "needs a CUDA device"
fi
exit $fail
