#!/usr/bin/env python3
"""Joins detmoe_perf_gemm's Google Benchmark JSON with gemm_grouped_torch.py's JSON into
results/gemm_<tag>.json and prints the comparison table (Markdown).

Ratios: ours / baseline in TFLOP/s from medians (>1 = we are faster). Targets (issue 4):
dense forward ≥ 0.85× cuBLAS, dense data/weight grad ≥ 0.8×, grouped ≥ 0.95× torch._grouped_mm.
"""
import argparse
import json
import re

TARGETS = {"dense/forward": 0.85, "dense/data_grad": 0.8, "dense/weight_grad": 0.8, "grouped": 0.95}


def target_for(name):
    for prefix, t in TARGETS.items():
        if name.startswith(prefix):
            return t
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench_json")
    ap.add_argument("torch_json")
    ap.add_argument("out")
    args = ap.parse_args()
    bench = json.load(open(args.bench_json))
    torch_cases = {}
    try:
        tj = json.load(open(args.torch_json))
        torch_cases = {c["name"]: c for c in tj["cases"]}
        torch_version = tj.get("torch")
    except (OSError, ValueError, KeyError):
        torch_version = None

    ours, baselines = {}, {}
    for b in bench["benchmarks"]:
        m = re.match(r"gemm/(dense|grouped)/([^/]+)/(ours|cublas)", b["name"])
        if not m:
            continue
        key = f"{m.group(1)}/{m.group(2)}"
        entry = {"median_ms": b["median_ms"], "tflops": b["tflops"], "min_ms": b["min_ms"], "max_ms": b["max_ms"]}
        (ours if m.group(3) == "ours" else baselines)[key] = dict(entry, baseline="cuBLAS")
    for name, c in torch_cases.items():
        baselines[f"grouped/{name}"] = {"median_ms": c["median_ms"], "tflops": c["tflops"], "min_ms": c["min_ms"],
                                        "max_ms": c["max_ms"], "baseline": f"torch._grouped_mm ({c['out_dtype']} out)"}

    rows = []
    for key, o in ours.items():
        base = baselines.get(key)
        ratio = o["tflops"] / base["tflops"] if base else None
        target = target_for(key) if base else None  # cases without a baseline are informational
        rows.append({"case": key, "ours": o, "baseline": base, "ratio": ratio, "target": target,
                     "meets_target": (ratio >= target) if (ratio is not None and target is not None) else None})
    report = {"schema": "detmoe.gemm-perf/1", "context": bench.get("context", {}), "torch": torch_version,
              "timing": "CUDA events around single launches, 3 warm-up, median of 30", "results": rows}
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)

    print("| case | ours ms | ours TFLOP/s | baseline | base TFLOP/s | ratio | target |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        b = r["baseline"]
        print(f"| {r['case']} | {r['ours']['median_ms']:.3f} | {r['ours']['tflops']:.0f} | "
              f"{b['baseline'] if b else '-'} | {b['tflops']:.0f} | " if b else
              f"| {r['case']} | {r['ours']['median_ms']:.3f} | {r['ours']['tflops']:.0f} | - | - | ", end="")
        print(f"{r['ratio']:.3f} | {'≥' + str(r['target'])} {'ok' if r['meets_target'] else 'MISS'} |" if r["ratio"] else "- | - |")


if __name__ == "__main__":
    main()
