#!/usr/bin/env bash
# CLI contract: exit codes, stable oracle hashes, placeholder commands say what is missing.
#   cli_test.sh <path to detmoe>
set -u
detmoe=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
expect() {  # expect <code> <description> <command...>
  local want=$1 what=$2; shift 2
  "$@" >"$tmp/out" 2>&1; local got=$?
  if [ "$got" -ne "$want" ]; then echo "FAIL: $what: exit $got, want $want"; cat "$tmp/out"; fail=1; else echo "ok: $what"; fi
}
expect 0 "help" "$detmoe" --help
expect 2 "no subcommand" "$detmoe"
expect 2 "unknown option" "$detmoe" oracle --shape tiny --bogus
expect 2 "unknown shape names the value" "$detmoe" oracle --shape huge
grep -q "huge" "$tmp/out" || { echo "FAIL: message does not name 'huge'"; fail=1; }
expect 2 "misaligned H names the dimension" "$detmoe" oracle --T 4 --H 65 --F 64 --E 4 --k 2
grep -q "H = 65 must be a multiple of 64" "$tmp/out" || { echo "FAIL: message does not name H = 65"; cat "$tmp/out"; fail=1; }
expect 2 "k > E" "$detmoe" oracle --T 4 --H 64 --F 64 --E 2 --k 3
expect 2 "bad routing text" "$detmoe" oracle --shape tiny --routing sideways
expect 2 "gate is not built yet" "$detmoe" gate
expect 0 "oracle small" "$detmoe" oracle --shape small --seed 1 --json "$tmp/a.json"
expect 0 "oracle small again" "$detmoe" oracle --shape small --seed 1 --json "$tmp/b.json"
strip() { grep -v '"seconds"' "$1"; }
if ! diff <(strip "$tmp/a.json") <(strip "$tmp/b.json") >/dev/null; then echo "FAIL: oracle hashes differ between reruns"; fail=1; else echo "ok: oracle hashes stable on rerun"; fi
expect 0 "oracle other seed" "$detmoe" oracle --shape small --seed 2 --json "$tmp/c.json"
if diff <(strip "$tmp/a.json") <(strip "$tmp/c.json") >/dev/null; then echo "FAIL: seeds 1 and 2 give the same hashes"; fail=1; fi
"$detmoe" accept --level 1 --json "$tmp/accept.json" >"$tmp/out" 2>&1
if nvidia-smi -L >/dev/null 2>&1; then echo "ok: accept ran (GPU present: verdicts checked by the GPU suite)"
elif grep -q "CPU-only result" "$tmp/out" && grep -q "ACCEPT: PASS" "$tmp/out"; then echo "ok: accept gives a CPU-only result"
else echo "FAIL: accept without GPU"; cat "$tmp/out"; fail=1; fi
exit $fail
