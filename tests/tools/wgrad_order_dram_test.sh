#!/usr/bin/env bash
# perf/wgrad_order_dram.py's model on small launches: every order visits each tile once, an L2
# that holds everything reads each operand exactly once, and a smaller L2 never reads less.
#   wgrad_order_dram_test.sh SOURCE_DIR
set -u
src=${1:?source dir}
python3 - "$src/perf" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import wgrad_order_dram as w
fail = 0
def check(what, ok):
    global fail
    print(("ok: " if ok else "FAIL: ") + what)
    fail |= not ok
for order in ("m1", "m3", "m8", "n2", "n8"):
    tiles = w.band_order(9, 5, order)
    check(f"{order}: each of 9 x 5 tiles once", sorted(tiles) == sorted((m, n) for m in range(9) for n in range(5)))
check("m3 runs m fastest", w.band_order(9, 5, "m3")[:4] == [(0, 0), (1, 0), (2, 0), (0, 1)])
check("n2 runs n fastest", w.band_order(9, 5, "n2")[:4] == [(0, 0), (0, 1), (1, 0), (1, 1)])
experts, m, n, rows = w.LAUNCHES["qwen3-down"]
once = experts * (m + n) * rows * 2
for order in ("m8", "n8"):
    for deal in ("static", "tickets"):
        big = w.simulate(experts, m, n, rows, order, 1e12, 4, "keep", 132, 0.005, 0.02, 1, deal)
        small = w.simulate(experts, m, n, rows, order, 4e6, 4, "keep", 132, 0.005, 0.02, 1, deal)
        check(f"{order} {deal}: unbounded L2 reads each operand once ({big} of {once})", big == once)
        check(f"{order} {deal}: a 4 MB L2 reads at least that ({small})", small >= once)
sys.exit(fail)
PY
