#!/usr/bin/env python3
"""Where the warps of one kernel wait, per SASS instruction, from ncu's source page.

Reads `ncu --import R --page source --print-source sass --csv` (stdin or a file) and prints the
instructions holding the most warp-stall samples, each with its neighbours, so a stall can be
tied to the code around it (a named barrier after a bulk wait, an mbarrier try-wait, ...).

    ncu --import prof.ncu-rep --page source --print-source sass --csv > sass.csv
    perf/ncu_hotspots.py sass.csv --top 30 --context 3

With --span OPCODE, also the region from the first to the last instruction containing OPCODE (an
unrolled epilogue is found by its MUFU.EX2, say): its share of the samples, its stall reasons and
its executed instructions per opcode — session 32 found the backward's dSwiGLU epilogue this way
(`--span MUFU.EX2 results/ncu_sass_mixtral_bwd_h100_session25.csv.gz`: ≈ 6,000 instructions, 57 % of
their samples `stall_no_inst`). Files may be gzip-compressed (.gz).
"""
import argparse
import collections
import csv
import gzip
import io
import sys

import sass_summary


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def summarise_span(body, header, col, src, samples, total, opcode, pad):
    """The region [first − pad, last + pad] of the instructions containing `opcode`."""
    hits = [i for i, r in enumerate(body) if opcode in r[src]]
    print(f"\n--- span of {opcode}: {len(hits)} instructions contain it")
    if not hits:
        return
    lo, hi = max(0, hits[0] - pad), min(len(body), hits[-1] + pad + 1)
    span = body[lo:hi]
    span_samples = sum(number(r[samples]) for r in span)
    share = 100 * span_samples / total if total else 0
    print(f"instructions {lo}..{hi - 1} ({hi - lo}), {span_samples:.0f} samples = {share:.2f} % of the kernel's")
    reasons = [i for n, i in col.items() if n.startswith("stall_") and "Not Issued" not in n]
    by_reason = sorted(((sum(number(r[i]) for r in span), header[i]) for i in reasons), reverse=True)
    for count, name in by_reason[:8]:
        if count > 0:
            print(f"  {name:<28} {100 * count / span_samples if span_samples else 0:5.1f} % of the span's samples")
    executed = next((i for n, i in col.items() if n.strip() == "Instructions Executed"), None)
    if executed is not None:
        per_op = collections.Counter()
        for r in span:
            if r[src].split():
                per_op[sass_summary.opcode(r[src]).split(".")[0]] += number(r[executed])
        run = sum(per_op.values())
        print(f"  executed warp instructions {run:.0f}: " +
              ", ".join(f"{op} {100 * n / run:.0f} %" for op, n in per_op.most_common(10) if run))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="?", help="ncu source-page CSV (default: stdin)")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--context", type=int, default=2, help="instructions shown before each hot one")
    ap.add_argument("--span", metavar="OPCODE", help="summarise the region from the first to the last instruction "
                    "containing OPCODE (e.g. MUFU.EX2)")
    ap.add_argument("--pad", type=int, default=32, help="instructions added on each side of --span's region")
    ap.add_argument("--listing", type=float, default=0.0,
                    help="also list, in address order, every instruction with at least this %% of the samples "
                         "and its two largest stall reasons")
    a = ap.parse_args()
    if a.csv and a.csv.endswith(".gz"):
        text = gzip.open(a.csv, "rt", encoding="utf-8", errors="replace").read()
    else:
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
    if a.span:
        summarise_span(body, header, col, src, samples, total, a.span, a.pad)
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
