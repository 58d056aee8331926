#!/usr/bin/env bash
# ci/device-fuzz-campaign.sh on the CPU oracle: shards over contiguous index ranges run at once and
# merge into one report holding every problem once; a planted nondeterminism in one shard's range
# fails the campaign while the merge still happens.
#   fuzz_campaign_test.sh path/to/detmoe source_dir
set -u
detmoe=${1:?detmoe binary} src=${2:?source dir}
source "$(dirname "$0")/expect.sh"
export BIN=$detmoe IMPL=oracle AGAINST=oracle BITWISE= SEED=5 MINUTES=2 \
  LIMITS="--max-tokens 30 --max-experts 8 --max-hidden 128 --max-intermediate 128 --max-shared 64"
mkdir -p "$tmp/a" "$tmp/b"
OUT=$tmp/a START=10 PROBLEMS=7 SHARDS=3 expect 0 "a clean campaign of 7 problems in 3 shards" "$src/ci/device-fuzz-campaign.sh"
grep -q "3 reports, 7 checks (7 Pass), state finished" "$tmp/out" || { echo "FAIL: merge summary"; cat "$tmp/out"; fail=1; }
python3 - "$tmp/a/fuzz-campaign.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
names = sorted(int(c["name"].split("/")[1]) for c in d["checks"])
assert names == list(range(10, 17)), names  # shards of 3, 3 and 1: every index once
assert d["run"]["command"] == "fuzz" and d["run"]["state"] == "finished", d["run"]
PY
[ -s "$tmp/a/fuzz-campaign.log" ] || { echo "FAIL: no shard log"; fail=1; }
# The plant makes a rerun differ above 37 tokens; with these limits some problems are that big.
OUT=$tmp/b START=0 PROBLEMS=12 SHARDS=2 LIMITS="--max-tokens 120 --max-experts 8 --max-hidden 128 --max-intermediate 128" \
  DETMOE_TEST_PLANT=fuzz-mismatch expect 1 "a planted nondeterminism fails the campaign" "$src/ci/device-fuzz-campaign.sh"
grep -q "^FAIL problem" "$tmp/out" || { echo "FAIL: no failing problem listed"; cat "$tmp/out"; fail=1; }
[ -s "$tmp/b/fuzz-campaign.json" ] || { echo "FAIL: the failed campaign was not merged"; fail=1; }
exit $fail
