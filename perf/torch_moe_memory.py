"""The torch._grouped_mm pipeline's activation memory per shape (issue 18: the megakernel's
workspace is reported beside it).

For each shape: `saved` = memory still allocated after a differentiable forward, less its output
(what autograd keeps for the backward); `forward_peak` and `step_peak` = the highest allocation
above the inputs during the forward and during forward + backward (the weight gradients
included). torch.cuda's allocator counters, bytes.
  python perf/torch_moe_memory.py --json mem.json [--shapes ...] [--routing balanced]
"""
import argparse
import json
import sys

import torch

from torch_moe_pipeline import SHAPES, make_case, moe_forward


def measure(name, routing, seed):
    T, H, Fdim, E, k = SHAPES[name]
    x, w13, w2, dout, topk_idx, topk_w = make_case(name, routing, seed)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = moe_forward(x, topk_idx, topk_w, w13, w2, E)
    torch.cuda.synchronize()
    saved = torch.cuda.memory_allocated() - base - out.numel() * out.element_size()
    forward_peak = torch.cuda.max_memory_allocated() - base
    out.backward(dout)
    torch.cuda.synchronize()
    step_peak = torch.cuda.max_memory_allocated() - base
    row = {"shape": name, "routing": routing, "rows": T * k, "saved_bytes": saved, "forward_peak_bytes": forward_peak,
           "step_peak_bytes": step_peak}
    del x, w13, w2, dout, out
    torch.cuda.empty_cache()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--routing", default="balanced")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_moe_memory: no CUDA device", file=sys.stderr)
        return 3
    rows = []
    for name in args.shapes.split(","):
        r = measure(name, args.routing, args.seed)
        rows.append(r)
        print(f"torch {name:<14} saved {r['saved_bytes'] / 1e9:6.3f} GB  forward peak {r['forward_peak_bytes'] / 1e9:6.3f} GB  "
              f"fwd+bwd peak {r['step_peak_bytes'] / 1e9:6.3f} GB", flush=True)
    with open(args.json, "w") as f:
        json.dump({"schema": "detmoe.torch_memory/1", "torch": torch.__version__,
                   "gpu": torch.cuda.get_device_properties(0).name, "results": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
