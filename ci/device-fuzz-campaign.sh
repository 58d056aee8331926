#!/usr/bin/env bash
# A fuzz campaign (by default the megakernel against the reference) on the GPU machine, split into shards
# that run at once (one process each: a problem keeps the GPU busy only part of its time, the host
# builds the next), each over its own contiguous range of problem indices of one seed. The shard
# reports are merged into one (detmoe report merge); a range cut short is continued by a later
# call with START at the first index not run.
#   OUT=dir [BIN=build-device/detmoe] [SEED=1] [START=0] [PROBLEMS=10000] [SHARDS=8] [MINUTES=9] \
#     [IMPL=megakernel AGAINST=reference BITWISE=out,y LIMITS="--max-tokens N ..."] ci/device-fuzz-campaign.sh
# (tests/tools/fuzz_campaign_test.sh runs it on the CPU with IMPL=oracle.)
# Writes $OUT/fuzz-campaign.json (merged report) and $OUT/fuzz-campaign.log (the shards' logs).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$root/out-device}
BIN=${BIN:-$root/build-device/detmoe}
SEED=${SEED:-1} START=${START:-0} PROBLEMS=${PROBLEMS:-10000} SHARDS=${SHARDS:-8} MINUTES=${MINUTES:-9}
IMPL=${IMPL:-megakernel} AGAINST=${AGAINST-reference} BITWISE=${BITWISE-out,y} LIMITS=${LIMITS:-}
source "$root/ci/device-env.sh"
work=$(mktemp -d)
per=$(( (PROBLEMS + SHARDS - 1) / SHARDS ))
echo "fuzz campaign of $IMPL against ${AGAINST:-nothing}: seed $SEED, problems $START..$((START + PROBLEMS - 1)) in $SHARDS shards of $per, at most $MINUTES min"
pids=()
for ((j = 0; j < SHARDS; ++j)); do
  first=$((START + j * per)); n=$(( PROBLEMS - j * per < per ? PROBLEMS - j * per : per ))
  [ "$n" -gt 0 ] || break
  # shellcheck disable=SC2086 # LIMITS is a list of options
  "$BIN" fuzz --impl "$IMPL" --against "$AGAINST" ${BITWISE:+--bitwise "$BITWISE"} $LIMITS --seed "$SEED" --start "$first" \
    --problems "$n" --minutes "$MINUTES" --report "$work/shard$j.json" > "$work/shard$j.log" 2>&1 &
  pids+=($!)
done
rc=0
for j in "${!pids[@]}"; do
  wait "${pids[$j]}"; r=$?
  echo "shard $j exit $r: $(grep -E '^fuzz (PASS|FAIL)' "$work/shard$j.log" || tail -1 "$work/shard$j.log")"
  [ $r -eq 0 ] || rc=$r
done
for j in "${!pids[@]}"; do echo "=== shard $j"; cat "$work/shard$j.log"; done > "$OUT/fuzz-campaign.log"
grep -h -E "^FAIL|^refused|still fails|shrunk to|replay" "$work"/shard*.log | head -40
reports=(); for j in "${!pids[@]}"; do [ -f "$work/shard$j.json" ] && reports+=("$work/shard$j.json"); done
"$BIN" report merge "${reports[@]}" -o "$OUT/fuzz-campaign.json" || { [ "$rc" -ne 0 ] || rc=1; }
# Which indices ran: the next call starts where each shard stopped.
for j in "${!pids[@]}"; do
  last=$(grep -o '"fuzz/[0-9]*"' "$work/shard$j.json" | tr -dc '0-9\n' | sort -n | tail -1)
  echo "shard $j ran up to problem ${last:-none}"
done
rm -rf "$work"
exit $rc
