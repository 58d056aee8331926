#!/usr/bin/env python3
"""Summarise ncu's per-SASS-instruction source page (`ncu -i R --page source --csv --print-source sass`):
the instructions with the most warp-stall samples, samples per opcode, and per stall-reason column.
  python3 ci/stall_summary.py sass.csv [top]"""
import csv
import sys
from collections import Counter


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    with open(path, newline="") as f:
        lines = [l for l in f if l.strip() and not l.startswith("==")]
    rows = list(csv.DictReader(lines))
    if not rows:
        print("no rows")
        return
    header = list(rows[0].keys())
    print("columns:", " | ".join(header))
    samples = next((h for h in header if "Warp Stall Sampling (All" in h), None)
    if samples is None:
        print("no warp-stall sample column")
        return
    source = next((h for h in header if h.strip() in ("Source", "# Source")), header[1])
    total = sum(number(r[samples]) or 0 for r in rows)
    print(f"{len(rows)} instructions, {total:.0f} samples")
    by_op = Counter()
    for r in rows:
        op = r[source].split()[0] if r[source].split() else "?"
        if op.startswith("@"):
            op = r[source].split()[1] if len(r[source].split()) > 1 else op
        by_op[op.split(".")[0]] += number(r[samples]) or 0
    print("samples by opcode:", ", ".join(f"{k} {v / total:.1%}" for k, v in by_op.most_common(15)))
    reasons = Counter()
    for h in header:
        if h in (samples,) or "stall" not in h.lower():
            continue
        s = sum(number(r[h]) or 0 for r in rows)
        if s > 0:
            reasons[h] = s
    if reasons:
        print("stall columns:", "; ".join(f"{k} {v:.0f}" for k, v in reasons.most_common(20)))
    ranked = sorted(range(len(rows)), key=lambda i: -(number(rows[i][samples]) or 0))[:top]
    print(f"top {top} instructions (index, samples, share, sass):")
    for i in sorted(ranked):
        s = number(rows[i][samples]) or 0
        print(f"{i:6d} {s:8.0f} {s / total:6.2%}  {rows[i][source][:110]}")
    # Where the samples sit along the code: buckets of 128 instructions.
    print("samples per 128-instruction bucket (first index: share):")
    buckets = Counter()
    for i, r in enumerate(rows):
        buckets[i // 128] += number(r[samples]) or 0
    print("  " + ", ".join(f"{b * 128}:{v / total:.1%}" for b, v in sorted(buckets.items()) if v / total >= 0.005))


if __name__ == "__main__":
    main()
