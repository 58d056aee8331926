#!/usr/bin/env python3
"""Sums ncu's per-kernel durations (ci/device-kernel-times.sh's CSV: one row per kernel launch with
gpu__time_duration.sum) by kernel name, in order of first launch, divided by the number of times
the step ran (--runs), so each line is one step's cost of that kernel. --metrics NAME,... also lists
those metrics launch by launch (ci/device-kernel-times.sh's KT_METRICS), for the launches whose
kernel name matches --kernel (a regular expression; default: every launch)."""
import argparse
import csv
import re
import sys


def short(name):
    # Template arguments and parameter lists make every name unique; keep the kernel's own name.
    name = re.sub(r"\(.*$", "", name)
    name = re.sub(r"<.*>", "<…>", name)
    return name[:90]


def ncu_rows(path):
    """The rows of an ncu --csv output (metrics or the details page), after its log lines."""
    lines = open(path, errors="replace").read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"{path}: no ncu CSV header found")
    return csv.DictReader(lines[start:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--metrics", default="", help="comma-separated ncu metric names to list per launch")
    ap.add_argument("--kernel", default="", help="regular expression on the kernel name for --metrics")
    a = ap.parse_args()
    extra = [m for m in a.metrics.split(",") if m]
    per_launch = {}  # launch ID -> (kernel, {metric: "value unit"})
    order, total, count = [], {}, {}
    for row in ncu_rows(a.csv):
        if row.get("Metric Name") in extra and re.search(a.kernel, row["Kernel Name"]):
            launch = per_launch.setdefault(row["ID"], (short(row["Kernel Name"]), {}))
            launch[1][row["Metric Name"]] = f'{row["Metric Value"]} {row["Metric Unit"]}'
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        k = short(row["Kernel Name"])
        if k not in total:
            order.append(k)
            total[k], count[k] = 0.0, 0
        scale = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0, "second": 1e3, "s": 1e3}[row["Metric Unit"]]
        total[k] += float(row["Metric Value"].replace(",", "")) * scale
        count[k] += 1
    all_ms = sum(total.values()) / a.runs
    print(f"{'ms/step':>9} {'launches':>8}  kernel   (sum {all_ms:.3f} ms per step)")
    for k in order:
        print(f"{total[k] / a.runs:9.3f} {count[k] / a.runs:8.1f}  {k}")
    for launch_id, (k, values) in per_launch.items():
        print(f"  launch {launch_id} {k}: " + ", ".join(f"{m} {values.get(m, '-')}" for m in extra))


if __name__ == "__main__":
    main()
