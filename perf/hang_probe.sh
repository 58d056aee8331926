#!/usr/bin/env bash
# Runs a command with a time limit; if it is still running after PROBE_AFTER_S seconds (a kernel
# that hangs inside a CTA never returns), attaches cuda-gdb and prints where the GPU threads
# are (kernels, running blocks, and the backtraces of the producer and both consumer warpgroups
# of a few blocks), then kills it. This is how the warpgroup-shortcut hang of 2026-12-02 was
# located (producer in producer_acquire, consumers in consumer_wait).
#   PROBE_AFTER_S=40 PROBE_BLOCKS="0 5" perf/hang_probe.sh LOG_PREFIX command args...
# Writes LOG_PREFIX.log (the command's output) and LOG_PREFIX-gdb.log; exits with the
# command's status, or 124 after a probe. cuda-gdb is on the GPU machine only.
set -u
prefix=$1
shift
after=${PROBE_AFTER_S:-40}
"$@" >"$prefix.log" 2>&1 &
pid=$!
for _ in $(seq 1 "$after"); do
  sleep 1
  kill -0 "$pid" 2>/dev/null || break
done
if kill -0 "$pid" 2>/dev/null; then
  echo "hang_probe: $* still running after ${after} s; attaching cuda-gdb"
  cmds=(-ex "info cuda kernels" -ex "info cuda blocks")
  for b in ${PROBE_BLOCKS:-0 5}; do
    for t in 0 128 256; do cmds+=(-ex "cuda block $b thread $t" -ex "bt 3"); done
  done
  timeout 60 cuda-gdb -p "$pid" -batch "${cmds[@]}" >"$prefix-gdb.log" 2>&1
  grep -E "Switching focus|^#0|Invalid coordinates" "$prefix-gdb.log" | head -30
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  exit 124
fi
wait "$pid"
