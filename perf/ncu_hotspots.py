#!/usr/bin/env python3
"""Where the warps of one kernel wait, per SASS instruction, from ncu's source page.

Reads `ncu --import R --page source --print-source sass --csv` (stdin or a file) and prints the
instructions holding the most warp-stall samples, each with its neighbours, so a stall can be
tied to the code around it (a named barrier after a bulk wait, an mbarrier try-wait, ...).

    ncu --import prof.ncu-rep --page source --print-source sass --csv > sass.csv
    perf/ncu_hotspots.py sass.csv --top 30 --context 3
"""
import argparse
import csv
import io
import sys


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="?", help="ncu source-page CSV (default: stdin)")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--context", type=int, default=2, help="instructions shown before each hot one")
    ap.add_argument("--listing", type=float, default=0.0,
                    help="also list, in address order, every instruction with at least this %% of the samples "
                         "and its two largest stall reasons")
    a = ap.parse_args()
    text = open(a.csv, encoding="utf-8", errors="replace").read() if a.csv else sys.stdin.read()
    lines = text.splitlines()
    # ncu prints preamble lines before the table: start at the header naming the SASS source.
    start = next((i for i, l in enumerate(lines) if "Source" in l and "," in l and "Address" in l), None)
    if start is None:
        start = next((i for i, l in enumerate(lines) if l.count(",") > 3), 0)
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    if not rows:
        print("no table found")
        return 1
    header = rows[0]
    print("columns:", " | ".join(header))
    col = {name: i for i, name in enumerate(header)}
    src = next((i for n, i in col.items() if n.strip() == "Source"), None)
    addr = next((i for n, i in col.items() if n.strip() == "Address"), None)
    samples = next((i for n, i in col.items() if "Warp Stall Sampling (All" in n), None)
    if samples is None:
        samples = next((i for n, i in col.items() if "Sampling" in n), None)
    if src is None or samples is None:
        print("missing Source or sampling column")
        return 1
    body = [r for r in rows[1:] if len(r) == len(header)]
    total = sum(number(r[samples]) for r in body)
    print(f"{len(body)} instructions, {total:.0f} stall samples")
    hot = sorted(range(len(body)), key=lambda i: -number(body[i][samples]))[: a.top]
    for rank, i in enumerate(hot, 1):
        share = 100 * number(body[i][samples]) / total if total else 0
        print(f"\n#{rank}: {share:.1f} % of samples")
        for j in range(max(0, i - a.context), i + 1):
            mark = ">" if j == i else " "
            where = body[j][addr] if addr is not None else str(j)
            print(f" {mark} {where:>8} {number(body[j][samples]):>8.0f}  {body[j][src].strip()}")
    if a.listing > 0:
        reasons = [i for n, i in col.items() if n.startswith("stall_") and "Not Issued" not in n]
        print(f"\n--- instructions with >= {a.listing} % of the samples, in address order")
        for j, r in enumerate(body):
            share = 100 * number(r[samples]) / total if total else 0
            if share < a.listing:
                continue
            top = sorted(reasons, key=lambda i: -number(r[i]))[:2]
            why = ", ".join(f"{header[i][6:]} {number(r[i]):.0f}" for i in top if number(r[i]) > 0)
            where = r[addr] if addr is not None else str(j)
            print(f"{where:>8} {share:5.2f} %  {r[src].strip()[:70]:<70} [{why}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
