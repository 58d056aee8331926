#!/usr/bin/env bash
# CLI contract: exit codes, stable oracle hashes, placeholder commands say what is missing.
#   cli_test.sh <path to detmoe>
set -u
detmoe=$1
source "$(dirname "$0")/expect.sh"
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
# Replay: a seeded input file through the oracle gives the seeded oracle's hashes.
expect 0 "write seeded inputs" "$detmoe" run --write-inputs "$tmp/in.safetensors" --shape small-shared --seed 3
expect 0 "replay through the oracle" "$detmoe" run --impl oracle --inputs "$tmp/in.safetensors" --outputs "$tmp/out.safetensors"
grep -E '^  (out|d_x|dws_down) ' "$tmp/out" | awk '{print $1, $3}' | sort >"$tmp/replayed"
"$detmoe" oracle --shape small-shared --seed 3 | grep -E '^(out|d_x|dws_down) ' | awk '{print $1, $5}' | sort >"$tmp/seeded"
if [ "$(wc -l <"$tmp/replayed")" -ne 3 ] || ! diff "$tmp/replayed" "$tmp/seeded" >/dev/null; then
  echo "FAIL: replayed hashes differ from the seeded oracle"; cat "$tmp/replayed" "$tmp/seeded"; fail=1; else echo "ok: replay matches the seeded oracle"; fi
head -c 100 "$tmp/in.safetensors" >"$tmp/truncated.safetensors"
expect 3 "truncated input file is an I/O error" "$detmoe" run --impl oracle --inputs "$tmp/truncated.safetensors" --outputs "$tmp/o2"
expect 2 "unknown impl names the known ones" "$detmoe" run --impl warp9 --inputs "$tmp/in.safetensors" --outputs "$tmp/o3"
grep -q "known: oracle" "$tmp/out" || { echo "FAIL: unknown impl message"; cat "$tmp/out"; fail=1; }
# Option validation: a value the command cannot honour is refused, naming it (exit 2).
expect 2 "--seed -1 is refused, not wrapped to 2^64-1" "$detmoe" oracle --shape tiny --seed -1
grep -q "seed -1 " "$tmp/out" || { echo "FAIL: message does not name seed -1"; cat "$tmp/out"; fail=1; }
expect 2 "--seed 2^64 is refused, not saturated" "$detmoe" oracle --shape tiny --seed 18446744073709551616
grep -q "18446744073709551616" "$tmp/out" || { echo "FAIL: message does not name the seed"; cat "$tmp/out"; fail=1; }
expect 0 "--seed 2^64-1 is a seed" "$detmoe" oracle --shape tiny --seed 18446744073709551615 --forward-only
expect 2 "bench --seed -1 is refused" "$detmoe" bench --seed -1
expect 2 "--P 0 is refused" "$detmoe" oracle --shape tiny --P 0
grep -q "P = 0" "$tmp/out" || { echo "FAIL: message does not name P = 0"; cat "$tmp/out"; fail=1; }
expect 2 "--P -1 is refused" "$detmoe" oracle --shape tiny --P -1
expect 2 "--Fs -5 is refused" "$detmoe" oracle --shape tiny --Fs -5
grep -q "Fs = -5" "$tmp/out" || { echo "FAIL: message does not name Fs = -5"; cat "$tmp/out"; fail=1; }
expect 2 "partial custom shape names what is missing" "$detmoe" oracle --T 16
grep -q "missing: --H --F --E --k" "$tmp/out" || { echo "FAIL: message does not name the missing options"; cat "$tmp/out"; fail=1; }
expect 2 "--shape with a replay is refused" "$detmoe" run --impl oracle --inputs "$tmp/in.safetensors" --outputs "$tmp/o4" --shape small
grep -q -- "--shape applies to --write-inputs only" "$tmp/out" || { echo "FAIL: --shape with --inputs message"; cat "$tmp/out"; fail=1; }
expect 2 "--seed with a replay is refused" "$detmoe" run --impl oracle --inputs "$tmp/in.safetensors" --outputs "$tmp/o4" --seed 3
expect 2 "--routing with a replay is refused" "$detmoe" run --impl oracle --inputs "$tmp/in.safetensors" --outputs "$tmp/o4" --routing zipf1
expect 2 "--inputs with --write-inputs is refused" "$detmoe" run --write-inputs "$tmp/w.safetensors" --shape tiny --inputs "$tmp/in.safetensors"
# A replay file with a misspelt tensor ("dotx" for "dout", same length so the header stays valid)
# runs forward-only, and says so and names the tensor.
LC_ALL=C sed 's/"dout"/"dotx"/' "$tmp/in.safetensors" >"$tmp/misspelt.safetensors"
expect 0 "replay with an unknown tensor" "$detmoe" run --impl oracle --inputs "$tmp/misspelt.safetensors" --outputs "$tmp/o5"
grep -q "ignoring unknown tensor 'dotx'" "$tmp/out" || { echo "FAIL: unknown tensor not named"; cat "$tmp/out"; fail=1; }
grep -q "forward-only" "$tmp/out" || { echo "FAIL: forward-only run not announced"; cat "$tmp/out"; fail=1; }
# Exit codes: not implemented is 2 (usage), a required GPU that is missing is 3 (could not run).
# (the megakernel over a multi-GPU backend, refused before it looks for a GPU)
expect 2 "not implemented exits 2" "$detmoe" verify --impl megakernel --backend nccl --shape tiny
grep -q "NotImplemented" "$tmp/out" || { echo "FAIL: not a NotImplemented error"; cat "$tmp/out"; fail=1; }
if ! nvidia-smi -L >/dev/null 2>&1; then
  expect 3 "accept --require-gpu without a GPU" "$detmoe" accept --level 1 --require-gpu
  grep -q "no usable NVIDIA driver/GPU" "$tmp/out" || { echo "FAIL: no-GPU reason"; cat "$tmp/out"; fail=1; }
  expect 3 "verify without a GPU" "$detmoe" verify --shape tiny
  grep -q "no usable NVIDIA driver/GPU" "$tmp/out" || { echo "FAIL: no-GPU reason"; cat "$tmp/out"; fail=1; }
  expect 3 "bench without a GPU" "$detmoe" bench --no-torch
  grep -q "no usable NVIDIA driver/GPU" "$tmp/out" || { echo "FAIL: no-GPU reason"; cat "$tmp/out"; fail=1; }
fi
# Host memory is checked before any allocation: a valid problem too large for the machine fails
# at once (exit 3) naming the amount, never a std::bad_alloc after minutes.
start=$(date +%s)
DETMOE_HOST_MEMORY_LIMIT=8000000000 expect 3 "oracle at deepseek size on an 8 GB host" "$detmoe" oracle --shape deepseek-v3
grep -q "needs about .* GiB of host memory" "$tmp/out" || { echo "FAIL: no memory estimate in the message"; cat "$tmp/out"; fail=1; }
[ $(( $(date +%s) - start )) -le 5 ] || { echo "FAIL: the memory check came late"; fail=1; }
DETMOE_HOST_MEMORY_LIMIT=100000 expect 3 "golden check on a tiny host" "$detmoe" golden check --impl oracle --case small-balanced
exit $fail
