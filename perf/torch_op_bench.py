#!/usr/bin/env python3
"""The PyTorch op timed from Python beside the torch._grouped_mm pipeline, in one process.

For each DESIGN.md §7 shape and routing: the op's forward (no grad, impl="auto", and each
implementation named), and its forward+backward (autograd, impl="auto" = the reference), timed
exactly like perf/torch_moe_pipeline.py times the pipeline (same data scale, routing draws,
2×L2 flush before each step, CUDA events, median of --timed after 3 warm-ups). The pipeline is
timed in the same run. Writes JSON:
  {"schema": "detmoe.torch_op_bench/1", "torch", "gpu", "results": [
     {"shape", "routing", "pass", "layer" ("detmoe:auto", "detmoe:reference", "detmoe:megakernel",
      "pipeline"), "impl" (what auto ran), "median_ms", "min_ms", "max_ms", "tflops", "timed"}]}
Compare with detmoe_perf_layer's medians of the same shapes for the op's overhead over C++.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import detmoe  # noqa: E402
from torch_moe_pipeline import SHAPES, l2_flush_buffer, make_case, moe_forward, time_steps  # noqa: E402


def run_case(name, routing, timed, seed, flush, layers):
    T, H, Fdim, E, k = SHAPES[name]
    x, w13, w2, dout, topk_idx, topk_w = make_case(name, routing, seed)
    flops = 6.0 * T * k * H * Fdim
    results = []

    def detmoe_fwd(impl):
        def step():
            with torch.no_grad():
                detmoe.moe_stacked(x, topk_idx, topk_w, w13, w2, impl=impl)
        return step

    def clear():
        for t in (x, w13, w2, topk_w):
            t.grad = None

    def detmoe_fwd_bwd():
        clear()
        detmoe.moe_stacked(x, topk_idx, topk_w, w13, w2).backward(dout)

    def pipeline_fwd():
        with torch.no_grad():
            moe_forward(x, topk_idx, topk_w, w13, w2, E)

    def pipeline_fwd_bwd():
        clear()
        moe_forward(x, topk_idx, topk_w, w13, w2, E).backward(dout)

    auto_fwd = detmoe.resolve_impl(T, H, Fdim, E, k)
    cases = []
    if "pipeline" in layers:
        cases += [("pipeline", "fwd", "", pipeline_fwd, 1), ("pipeline", "fwd+bwd", "", pipeline_fwd_bwd, 3)]
    if "detmoe" in layers:
        cases += [("detmoe:auto", "fwd", auto_fwd, detmoe_fwd("auto"), 1),
                  ("detmoe:reference", "fwd", "reference", detmoe_fwd("reference"), 1),
                  ("detmoe:megakernel", "fwd", "megakernel", detmoe_fwd("megakernel"), 1),
                  ("detmoe:auto", "fwd+bwd", "reference", detmoe_fwd_bwd, 3)]
    for layer, pass_name, impl, step, mult in cases:
        med, lo, hi = time_steps(step, timed, flush)
        results.append({"shape": name, "routing": routing, "pass": pass_name, "layer": layer, "impl": impl,
                        "median_ms": med, "min_ms": lo, "max_ms": hi, "tflops": mult * flops / (med * 1e-3) / 1e12,
                        "timed": timed})
        print(f"{layer:<18} {name:<14} {routing:<9} {pass_name:<8} {med:9.3f} ms  {results[-1]['tflops']:7.1f} TFLOP/s"
              f"  {impl}", flush=True)
    del x, w13, w2, dout
    detmoe.release_idle_layers()
    torch.cuda.empty_cache()
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--routings", default="balanced,zipf1")
    ap.add_argument("--timed", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--layers", default="detmoe,pipeline")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_op_bench: no CUDA device", file=sys.stderr)
        return 3
    props = torch.cuda.get_device_properties(0)
    flush = l2_flush_buffer()
    results = []
    for name in a.shapes.split(","):
        for routing in a.routings.split(","):
            results.extend(run_case(name, routing, a.timed, a.seed, flush, a.layers.split(",")))
    with open(a.json, "w") as f:
        json.dump({"schema": "detmoe.torch_op_bench/1", "torch": torch.__version__, "gpu": props.name,
                   "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
