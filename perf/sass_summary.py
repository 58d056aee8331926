"""Summarise a kernel's SASS (from `cuobjdump -sass BINARY > FILE` on the GPU machine, or from
perf/sass_local.py on the CPU machine).

Usage: python3 perf/sass_summary.py FILE [MARKER]

Prints the instruction count, how many of each wgmma form (HGMMA.64xN), warpgroup fence/wait
(WARPGROUP.ARRIVE / DEPBAR), spill (STL/LDL), TMA (UTMALDG/UTMASTG) and barrier instruction there
are, then the 30 instructions before and 20 after the first one containing MARKER (default
HGMMA.64x256): enough to see whether ptxas put extra waits or moves into a mainloop.
"""
import collections
import re
import sys

COUNTED = ("HGMMA", "WARPGROUP", "STL", "LDL", "UTMALDG", "UTMASTG", "BAR", "SYNCS")


def instructions(text):
    for line in text.splitlines():
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            yield m.group(1), m.group(2).strip()


def opcode(text):
    words = text.split()
    return words[1] if words[0].startswith("@") and len(words) > 1 else words[0]


def main():
    ins = list(instructions(open(sys.argv[1]).read()))
    marker = sys.argv[2] if len(sys.argv) > 2 else "HGMMA.64x256"
    counts = collections.Counter()
    for _, text in ins:
        op = opcode(text)
        parts = op.split(".")
        if parts[0] in COUNTED:
            counts[".".join(parts[:2]) if parts[0] in ("HGMMA", "WARPGROUP") else parts[0]] += 1
    print(sys.argv[1], "instructions", len(ins))
    print(dict(sorted(counts.items())))
    hits = [i for i, (_, text) in enumerate(ins) if marker in text]
    if hits:
        for address, text in ins[max(0, hits[0] - 30): hits[0] + 20]:
            print(address, text[:110])


if __name__ == "__main__":
    main()
