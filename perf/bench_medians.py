#!/usr/bin/env python3
"""One line per benchmark of a Google Benchmark JSON file: its name (without the iteration and
time suffixes, less an optional prefix), median ms and joules (per launch or per step, whichever
the suite counted) — what a device call prints of its perf runs.

    python3 perf/bench_medians.py OUT/gemm-deals.json --strip gemm/grouped/
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--strip", default="", help="prefix to drop from the names")
    a = ap.parse_args()
    for b in json.load(open(a.json))["benchmarks"]:
        name = b["name"].split("/iterations")[0].replace(a.strip, "", 1)
        joules = b.get("joules_per_launch", b.get("joules_per_step", 0.0))
        print(f"{name} {b['median_ms']:.3f} ms {joules:.2f} J")


if __name__ == "__main__":
    main()
