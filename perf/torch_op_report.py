#!/usr/bin/env python3
"""Summarises perf/torch_op_bench.py's JSON beside detmoe_perf_layer's (Google Benchmark JSON of
the same run): per shape, routing and pass, the op's median, the torch pipeline's, the speedup
over the pipeline, and the op's overhead over the C++ benchmark of the path it ran.
    torch_op_report.py op-bench.json layer-bench.json [--markdown]"""
import json
import sys


def cpp_medians(path):
    out = {}
    for b in json.load(open(path)).get("benchmarks", []):
        parts = b["name"].split("/")
        if len(parts) >= 4 and "median_ms" in b:
            out.setdefault((parts[0], parts[1], parts[2], parts[3]), b["median_ms"])
    return out


def main():
    op = json.load(open(sys.argv[1]))["results"]
    cpp = cpp_medians(sys.argv[2]) if len(sys.argv) > 2 else {}
    by = {(r["shape"], r["routing"], r["pass"], r["layer"]): r for r in op}
    rows = []
    for (shape, routing, pass_name, layer), r in by.items():
        if not layer.startswith("detmoe"):
            continue
        pipe = by.get((shape, routing, pass_name, "pipeline"))
        c = cpp.get((r["impl"], shape, routing, pass_name))
        rows.append((shape, routing, pass_name, layer, r["impl"], r["median_ms"], pipe["median_ms"] if pipe else None,
                     c))
    print("| shape | routing | pass | op (impl) | op ms | pipeline ms | speedup vs pipeline | C++ ms | op overhead |")
    print("|---|---|---|---|---|---|---|---|---|")
    for shape, routing, pass_name, layer, impl, ms, pipe, c in rows:
        sp = f"{pipe / ms:.2f}×" if pipe else "—"
        ov = f"{(ms / c - 1) * 100:+.1f} %" if c else "—"
        print(f"| {shape} | {routing} | {pass_name} | {layer} ({impl}) | {ms:.3f} | "
              f"{pipe:.3f} | {sp} | {c:.3f} | {ov} |" if pipe and c else
              f"| {shape} | {routing} | {pass_name} | {layer} ({impl}) | {ms:.3f} | {pipe or '—'} | {sp} | {c or '—'} | {ov} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
