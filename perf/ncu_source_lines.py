#!/usr/bin/env python3
"""Warp-stall samples and executed instructions of one kernel per source file and line.

ncu's CUDA-source view prints no metrics for this kernel (everything is inlined from headers), so
this joins the two things that do work: ncu's SASS page (samples and instructions executed per
instruction address) and `nvdisasm -g` of the same cubin (the innermost file and line of each
instruction offset, from a -lineinfo build). Offsets are counted from the function's first
instruction on both sides.

    ncu --section SourceCounters -k regex:KERNEL --launch-count 1 -o prof ./app ...
    ncu --import prof.ncu-rep --page source --print-source sass --csv > sass.csv
    cuobjdump -xelf all ./app && nvdisasm -g -c the.cubin > disasm.txt
    perf/ncu_source_lines.py sass.csv disasm.txt --kernel layer_forward_kernel --top 40

Files may be gzip-compressed (.gz). Prints the share of samples and of executed warp
instructions per file and per line, and, with --line FILE:LINE, that line's instructions.
"""
import argparse
import collections
import csv
import gzip
import io
import re
import sys


def open_text(path):
    return gzip.open(path, "rt", errors="replace") if path.endswith(".gz") else open(path, errors="replace")


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def read_lines_of(disasm, kernel):
    """offset → ((file, line), instruction text) for the function whose section names `kernel`."""
    where = {}
    current = ("?", 0)
    inside = False
    for text in disasm:
        if text.startswith("//----") and ".text." in text:
            inside = kernel in text
            continue
        if not inside:
            continue
        m = re.search(r'//## File "([^"]+)", line (\d+)', text)
        if m:
            current = (m.group(1), int(m.group(2)))
            continue
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(\S.*?)\s*;", text)
        if m:
            where[int(m.group(1), 16)] = (current, m.group(2))
    return where


def read_sass_page(page):
    lines = page.read().splitlines()
    start = next((i for i, l in enumerate(lines) if "Address" in l and "Source" in l), None)
    if start is None:
        raise SystemExit("no SASS table (Address, Source) in the ncu CSV")
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    col = {name.strip(): i for i, name in enumerate(header)}
    body = [r for r in rows[1:] if len(r) == len(header) and r[col["Address"]].startswith("0x")]
    return header, col, body


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sass_csv")
    ap.add_argument("disasm")
    ap.add_argument("--kernel", required=True, help="a substring of the kernel's mangled name")
    ap.add_argument("--top", type=int, default=30, help="lines to list")
    ap.add_argument("--line", help="FILE:LINE (FILE a path suffix): list that line's instructions")
    a = ap.parse_args()
    with open_text(a.disasm) as f:
        where = read_lines_of(f, a.kernel)
    if not where:
        raise SystemExit(f"no instructions of a function matching {a.kernel} in {a.disasm}")
    with open_text(a.sass_csv) as f:
        header, col, body = read_sass_page(f)
    samples = next(i for n, i in col.items() if n.startswith("Warp Stall Sampling (All"))
    executed = col["Instructions Executed"]
    base = min(int(r[col["Address"]], 16) for r in body)
    total_s = sum(number(r[samples]) for r in body) or 1.0
    total_e = sum(number(r[executed]) for r in body) or 1.0
    per_file = collections.defaultdict(lambda: [0.0, 0.0])
    per_line = collections.defaultdict(lambda: [0.0, 0.0])
    unmapped = 0.0
    picked = []
    for r in body:
        off = int(r[col["Address"]], 16) - base
        s, e = number(r[samples]), number(r[executed])
        if off not in where:
            unmapped += s
            continue
        (path, line), text = where[off]
        for table, key in ((per_file, path), (per_line, (path, line))):
            table[key][0] += s
            table[key][1] += e
        if a.line:
            want_file, want_line = a.line.rsplit(":", 1)
            if path.endswith(want_file) and line == int(want_line):
                picked.append((off, s, e, text))
    print(f"{len(body)} instructions, {total_s:.0f} samples, {total_e:.0f} warp instructions executed; "
          f"{100 * unmapped / total_s:.2f} % of samples at offsets nvdisasm did not list")
    print("\n% samples  % executed  file")
    for path, (s, e) in sorted(per_file.items(), key=lambda kv: -kv[1][0]):
        print(f"{100 * s / total_s:8.2f}  {100 * e / total_e:10.2f}  {path}")
    print(f"\n% samples  % executed  line (top {a.top})")
    for (path, line), (s, e) in sorted(per_line.items(), key=lambda kv: -kv[1][0])[: a.top]:
        print(f"{100 * s / total_s:8.2f}  {100 * e / total_e:10.2f}  {path}:{line}")
    if a.line:
        print(f"\ninstructions of {a.line}: offset, samples, executed, SASS")
        for off, s, e, text in picked:
            print(f"  {off:06x} {s:8.0f} {e:12.0f}  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
