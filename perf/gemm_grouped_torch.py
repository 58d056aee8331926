#!/usr/bin/env python3
"""torch._grouped_mm on the same expert segments as detmoe_perf_gemm's grouped benchmarks.

Reads the segments file the C++ benchmark wrote (DETMOE_GEMM_SEGMENTS_OUT), times each case
like the C++ side (CUDA events around single launches, warm-up, median of 30; NVML energy over the
timed launches and more of the same pattern up to one second, as detmoe_perf_gemm) and writes JSON:
  {"torch": "<version>", "cases": [{"name", "median_ms", "tflops", "out_dtype", "joules_per_launch",
                                    "avg_watts", ...}]}
"""
import argparse
import json
import statistics
import sys

import torch

from torch_moe_pipeline import EnergyWindow

TIMED = 30
WARMUP = 3


def median_ms(fn, energy):
    """Median, min, max ms of TIMED launches; fills energy["joules_per_launch"], ["avg_watts"]."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    window = EnergyWindow(1.0)
    times = []
    for _ in range(TIMED):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    figures = window.finish(TIMED, lambda: (fn(), torch.cuda.synchronize()))
    if figures:
        energy.update(joules_per_launch=figures["joules"], avg_watts=figures["watts"])
    return statistics.median(times), min(times), max(times)


def grouped_call(case):
    """Builds inputs for one case and returns (callable, flops, out dtype name)."""
    dev = "cuda"
    bf16 = torch.bfloat16
    counts = torch.tensor(case["counts"], dtype=torch.int32, device=dev)
    offs = torch.cumsum(counts, 0, dtype=torch.int32)
    rows = int(counts.sum())
    groups = len(case["counts"])
    n, k, m = case["n"], case["k"], case["m"]
    gen = torch.Generator(device=dev).manual_seed(7)
    rand = lambda *shape: torch.randn(*shape, device=dev, dtype=bf16, generator=gen)
    if case["layout"] == "forward":  # x [rows, k] · W_g [n, k]ᵀ (nn.Linear weights)
        x, w = rand(rows, k), rand(groups, n, k)
        return (lambda: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)), 2.0 * rows * n * k, "bf16"
    if case["layout"] == "data-grad":  # dY [rows, k] · W_g [k, n]
        dy, w = rand(rows, k), rand(groups, k, n)
        return (lambda: torch._grouped_mm(dy, w, offs=offs)), 2.0 * rows * n * k, "bf16"
    # weight-grad: dW_g [m, n] = A_gᵀ · B_g over the group's rows.
    a, b = rand(rows, m), rand(rows, n)
    flops = 2.0 * rows * n * m
    try:
        fn = lambda: torch._grouped_mm(a.t(), b, offs=offs, out_dtype=torch.float32)
        fn()
        return fn, flops, "fp32"
    except Exception as e:  # older builds: bf16 output only
        print(f"note: fp32 output not available for the weight gradient ({e}); timing bf16", file=sys.stderr)
        return (lambda: torch._grouped_mm(a.t(), b, offs=offs)), flops, "bf16"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("segments")
    ap.add_argument("out")
    args = ap.parse_args()
    with open(args.segments) as f:
        cases = json.load(f)["cases"]
    results = []
    for case in cases:
        fn, flops, out_dtype = grouped_call(case)
        energy = {}
        med, lo, hi = median_ms(fn, energy)
        results.append({"name": case["name"], "median_ms": med, "min_ms": lo, "max_ms": hi,
                        "tflops": flops / (med * 1e-3) / 1e12, "out_dtype": out_dtype, **energy})
        joules = f" {energy['joules_per_launch']:.3f} J {energy['avg_watts']:.0f} W" if energy else ""
        print(f"torch._grouped_mm {case['name']:40s} {med:8.3f} ms {results[-1]['tflops']:7.1f} TFLOP/s{joules}",
              flush=True)
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "cases": results}, f, indent=2)


if __name__ == "__main__":
    main()
