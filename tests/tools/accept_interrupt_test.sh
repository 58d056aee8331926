#!/usr/bin/env bash
# An interrupted `accept` ends its report "aborted" and leaves no temporary files.
#   accept_interrupt_test.sh <path to detmoe>
# Deterministic, no sleeps to hit a window: accept's stdout is a FIFO that the test has filled,
# so accept blocks on its first printed verdict, after its first report is on disk. The test
# sends SIGTERM then, drains the FIFO, and accept must finish the current check, write the
# report as "aborted" and die of the signal (exit 143 in a shell).
set -u
detmoe=$1
tmp=$(mktemp -d)
pid=""; reader=""
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
  [ -n "$reader" ] && kill "$reader" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail=0

mkfifo "$tmp/stdout"
exec 3<>"$tmp/stdout"  # read-write: opening does not block, and the pipe exists while we fill it
# Fill the pipe to capacity (writes of one page until EAGAIN): accept's next write blocks.
dd if=/dev/zero of=/dev/fd/3 bs=4096 count=1024 oflag=nonblock 2>/dev/null
"$detmoe" accept --level 1 --json "$tmp/run.json" --html "$tmp/run.html" >"$tmp/stdout" 2>"$tmp/stderr" 3>&- &
pid=$!
for _ in $(seq 600); do [ -s "$tmp/run.json" ] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
if [ ! -s "$tmp/run.json" ]; then echo "FAIL: accept wrote no first report"; cat "$tmp/stderr"; exit 1; fi
grep -q '"state": "running"' "$tmp/run.json" || { echo "FAIL: first report is not running"; cat "$tmp/run.json"; fail=1; }
kill -TERM "$pid"
exec 4<"$tmp/stdout"  # a reader that is open before the read-write fd goes (else accept gets SIGPIPE)
exec 3>&-             # now only accept holds a write end: the drain ends when accept does
cat <&4 >"$tmp/printed" & reader=$!
exec 4<&-
wait "$pid"; rc=$?; pid=""
wait "$reader"; reader=""

[ "$rc" -eq 143 ] && echo "ok: accept died of SIGTERM (exit 143)" || { echo "FAIL: accept exit $rc, want 143"; fail=1; }
if grep -q '"state": "aborted"' "$tmp/run.json"; then echo "ok: report state aborted"
else echo "FAIL: report state is not aborted"; grep '"state"' "$tmp/run.json"; cat "$tmp/stderr"; fail=1; fi
grep -q '"finished_at": "20' "$tmp/run.json" || { echo "FAIL: aborted report has no finished_at"; fail=1; }
grep -q 'oracle-rerun' "$tmp/run.json" || { echo "FAIL: the check in progress was not recorded"; fail=1; }
grep -q 'aborted' "$tmp/run.html" 2>/dev/null || { echo "FAIL: the HTML page does not say aborted"; fail=1; }
"$detmoe" report validate "$tmp/run.json" >/dev/null || { echo "FAIL: aborted report does not validate"; fail=1; }
grep -q "ACCEPT: ABORTED" "$tmp/printed" || { echo "FAIL: accept did not say it was aborted"; tr -d '\000' <"$tmp/printed" | tail -5; fail=1; }
leftover=$(find "$tmp" -name '.*.tmp.*')
[ -z "$leftover" ] && echo "ok: no temporary files left" || { echo "FAIL: temporary files left: $leftover"; fail=1; }
exit $fail
