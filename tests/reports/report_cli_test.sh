#!/usr/bin/env bash
# `detmoe report` contract: exit codes, messages that name the JSON path, files written.
#   report_cli_test.sh <path to detmoe> <source dir>
set -u
detmoe=$1 src=$2
source "$(dirname "$0")/../tools/expect.sh"
has() {  # has <description> <text>: the last command's output contains text
  grep -qF -- "$2" "$tmp/out" || { echo "FAIL: $1: output lacks '$2'"; cat "$tmp/out"; fail=1; }
}
sample=$src/reports/examples/sample-run.json
expect 0 "render the example" "$detmoe" report render "$sample" -o "$tmp/run.html" --markdown "$tmp/run.md"
[ -s "$tmp/run.html" ] && [ -s "$tmp/run.md" ] || { echo "FAIL: render wrote nothing"; fail=1; }
grep -q 'data-plot="bandwidth"' "$tmp/run.html" || { echo "FAIL: no bandwidth plot in the page"; fail=1; }
cp "$sample" "$tmp/copy.json"
expect 0 "render next to the input by default" "$detmoe" report render "$tmp/copy.json"
[ -s "$tmp/copy.html" ] || { echo "FAIL: default output copy.html missing"; fail=1; }
expect 0 "validate the example" "$detmoe" report validate "$sample"
has "validate says valid" "valid detmoe.run/1"
expect 0 "print the schema" "$detmoe" report schema
cmp -s "$tmp/out" "$src/reports/schema/run-v1.schema.json" || { echo "FAIL: printed schema differs from the checked-in file"; fail=1; }

sed 's/"verdict": "Warn"/"verdict": "Maybe"/' "$sample" >"$tmp/bad.json"
expect 1 "validate finds a bad verdict" "$detmoe" report validate "$tmp/bad.json"
has "validate names the path" '$.checks[7].verdict: "Maybe" is not one of'
expect 2 "render refuses an invalid report" "$detmoe" report render "$tmp/bad.json" -o "$tmp/bad.html"
has "render names the path" '$.checks[7].verdict'
[ ! -e "$tmp/bad.html" ] || { echo "FAIL: an invalid report was rendered"; fail=1; }
echo '{"schema": "detmoe.run/2"}' >"$tmp/newer.json"
expect 1 "validate: newer schema" "$detmoe" report validate "$tmp/newer.json"
has "newer schema is named" 'not a schema this build reads'
echo '{' >"$tmp/broken.json"
expect 1 "validate: not JSON" "$detmoe" report validate "$tmp/broken.json"
expect 2 "render: not JSON" "$detmoe" report render "$tmp/broken.json"
expect 3 "render: missing file" "$detmoe" report render "$tmp/absent.json"
has "missing file is named" "$tmp/absent.json"
expect 3 "validate: missing file" "$detmoe" report validate "$tmp/absent.json"
# merge: two shards of an oracle fuzz campaign (CPU) become one report; overlapping shards are refused.
fuzz="fuzz --impl oracle --against '' --problems 2 --max-tokens 64 --max-experts 8 --max-hidden 128 --max-intermediate 128"
expect 0 "fuzz shard 0" sh -c "cd '$tmp' && '$detmoe' $fuzz --start 0 --report shard0.json"
expect 0 "fuzz shard 1" sh -c "cd '$tmp' && '$detmoe' $fuzz --start 2 --report shard1.json"
expect 0 "merge two shards" "$detmoe" report merge "$tmp/shard0.json" "$tmp/shard1.json" -o "$tmp/merged.json"
has "merge counts the checks" "2 reports, 4 checks (4 Pass), state finished"
expect 0 "the merged report validates" "$detmoe" report validate "$tmp/merged.json"
expect 2 "merge refuses overlapping shards" "$detmoe" report merge "$tmp/shard0.json" "$tmp/shard0.json" -o "$tmp/m2.json"
has "overlap is named" "check 'fuzz/0' on cpu is in report 0 and report 1"
expect 2 "report needs a subcommand" "$detmoe" report
expect 2 "render needs an input" "$detmoe" report render
exit $fail
