#!/usr/bin/env python3
"""Summary of an A/B call's rounds (ci/device-ab-prebuilt.sh): per tree and shape the median over
rounds of the forward, the backward (fwd+bwd − fwd of the same round) and fwd+bwd, in ms; and,
when the reference ran in the rounds too (AB_REF=round), the median over rounds of each tree's
ratio to the reference of the same round (ref / mk forward, mk / ref backward) — a ratio taken
within a round cancels the clock drift of a power-capped GPU between rounds, which moves single
medians by ±2 % (docs/PERF.md session 24).

  python3 perf/ab_summary.py OUT_DIR        (reads OUT_DIR/ab-<tree>-<round>.json)
"""
import collections
import glob
import os
import re
import statistics
import sys

from torch_op_report import cpp_medians  # (impl, shape, routing, pass) → median_ms


def load(out_dir):
    """{tree: {round: {(shape, routing, pass): median_ms}}} from the Google Benchmark JSON files."""
    runs = collections.defaultdict(dict)
    for path in sorted(glob.glob(os.path.join(out_dir, "ab-*.json"))):
        m = re.fullmatch(r"ab-(.+)-(\d+)\.json", os.path.basename(path))
        if not m:
            continue  # ab-reference.json of a call with AB_REF=1: one run, no round
        runs[m.group(1)][int(m.group(2))] = {key[1:]: ms for key, ms in cpp_medians(path).items()}
    return runs


def passes(medians):
    """(shape, routing) → {fwd, bwd, fwd+bwd} of one round."""
    out = collections.defaultdict(dict)
    for (shape, routing, step), ms in medians.items():
        out[(shape, routing)][step] = ms
    for v in out.values():
        if "fwd" in v and "fwd+bwd" in v:
            v["bwd"] = v["fwd+bwd"] - v["fwd"]
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    runs = load(sys.argv[1])
    if not runs:
        sys.exit(f"no ab-<tree>-<round>.json under {sys.argv[1]}")
    per = {tree: {rnd: passes(m) for rnd, m in rounds.items()} for tree, rounds in runs.items()}
    ref = per.get("reference")
    keys = sorted({k for rounds in per.values() for p in rounds.values() for k in p})
    for key in keys:
        print(f"{key[0]} {key[1]}")
        for tree, rounds in per.items():
            cells = []
            for step in ("fwd", "bwd", "fwd+bwd"):
                values = [p[key][step] for p in rounds.values() if key in p and step in p[key]]
                if values:
                    cells.append(f"{step} {statistics.median(values):.3f}")
            if ref is not None and tree != "reference":
                for step, label in (("fwd", "ref/mk fwd"), ("bwd", "mk/ref bwd")):
                    ratios = []
                    for rnd, p in rounds.items():
                        r = ref.get(rnd, {}).get(key, {})
                        if key in p and step in p[key] and step in r:
                            ratios.append(r[step] / p[key][step] if step == "fwd" else p[key][step] / r[step])
                    if ratios:
                        cells.append(f"{label} {statistics.median(ratios):.3f} ({len(ratios)} rounds)")
            print(f"  {tree:12s} " + "  ".join(cells) + f"  [{len(rounds)} rounds]")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # a reader such as `head` stopped early
        sys.stderr.close()
