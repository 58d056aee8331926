#!/usr/bin/env python3
"""The PyTorch MoE pipeline baseline: torch._grouped_mm, timed like detmoe_perf_layer.

Pipeline (DESIGN.md §7): routing metadata (stable argsort by expert, bincount, cumsum) → gather
x rows into expert order → grouped GEMM [W_gate; W_up] → SwiGLU → grouped GEMM W_down →
un-permute to [T, k, H] → fixed-order weighted sum over the k slots (one bmm per token:
[1, k]·[k, H], fp32 accumulation). Forward, and forward+backward through autograd (the gather's
backward is PyTorch's index_add, which is not bitwise deterministic: this is a speed baseline).

Each (shape, routing, pass) times --timed single steps with CUDA events after warm-up, with a
2×L2 write before every step (outside the timed region), and reports the median. Routing:
"balanced" = k distinct experts uniformly at random per token; "zipf1" = k distinct experts
drawn with weight 1/(i+1). Energy: after the timed steps, more steps of the same pattern (flush,
step, synchronise) until --energy-window seconds have passed; NVML's total-energy counter over
that window gives joules_per_step and avg_watts, counted the way detmoe_perf_layer counts them
(perf/gpu_energy.h), so the two figures compare. Writes JSON:
  {"schema": "detmoe.torch_pipeline/1", "torch": ..., "gpu": ..., "results": [
     {"shape", "routing", "pass", "median_ms", "min_ms", "max_ms", "tflops", "timed",
      "joules_per_step", "avg_watts" (when NVML answers)}]}
"""
import argparse
import ctypes
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

SHAPES = {  # T, H, F, E, k (per GPU, DESIGN.md §7)
    "qwen3-30b-a3b": (16384, 2048, 768, 128, 8),
    "deepseek-v3": (8192, 7168, 2048, 32, 8),
    "mixtral-8x7b": (8192, 4096, 14336, 8, 2),
    "gpt-oss-120b": (16384, 2880, 2880, 128, 4),
}


def make_routing(T, E, k, routing, gen):
    dev = "cuda"
    if routing == "balanced":
        scores = torch.rand(T, E, device=dev, generator=gen)
        idx = scores.topk(k, dim=1).indices
    elif routing == "zipf1":
        weights = 1.0 / torch.arange(1, E + 1, device=dev, dtype=torch.float32)
        idx = torch.multinomial(weights.expand(T, E), k, replacement=False, generator=gen)
    else:
        raise SystemExit(f"unknown routing {routing}")
    logits = torch.randn(T, k, device=dev, generator=gen)
    return idx.to(torch.int64), torch.softmax(logits, dim=1)


def moe_forward(x, topk_idx, topk_w, w13, w2, E):
    T, k = topk_idx.shape
    Fdim = w2.shape[2]
    flat = topk_idx.reshape(-1)
    order = torch.argsort(flat, stable=True)  # rows by expert, then token
    offs = torch.cumsum(torch.bincount(flat, minlength=E), 0).to(torch.int32)
    xs = x[order // k]
    h = torch._grouped_mm(xs, w13.transpose(-2, -1), offs=offs)
    g, u = h[:, :Fdim], h[:, Fdim:]
    a = F.silu(g) * u
    y = torch._grouped_mm(a, w2.transpose(-2, -1), offs=offs)
    y_slots = torch.empty_like(y).index_copy(0, order, y).view(T, k, -1)
    return torch.bmm(topk_w.to(y.dtype).unsqueeze(1), y_slots).squeeze(1)


class EnergyMeter:
    """NVML's total-energy counter of CUDA device 0 (matched by PCI bus id), or unavailable."""

    def __init__(self):
        self.lib = None
        self.device = ctypes.c_void_p()
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return
            props = torch.cuda.get_device_properties(0)
            bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
            if lib.nvmlDeviceGetHandleByPciBusId_v2(bus.encode(), ctypes.byref(self.device)) != 0:
                return
            self.lib = lib
        except (OSError, AttributeError):
            self.lib = None

    def joules(self):
        if self.lib is None:
            return None
        mj = ctypes.c_ulonglong()
        if self.lib.nvmlDeviceGetTotalEnergyConsumption(self.device, ctypes.byref(mj)) != 0:
            return None
        return mj.value * 1e-3


_METER = None


def energy_meter():
    global _METER
    if _METER is None:
        _METER = EnergyMeter()
    return _METER


class EnergyWindow:
    """Joules per step over the timed steps and more of the same pattern: open it just before the
    first timed step; finish(n, more) calls more() (one synchronised step) until `seconds` have
    passed, then returns {"joules", "watts", "steps"}, or {} when NVML does not answer."""

    def __init__(self, seconds):
        self.meter = energy_meter() if seconds > 0 else None
        self.seconds = seconds
        self.joules0 = self.meter.joules() if self.meter is not None else None
        self.wall0 = time.monotonic()

    def finish(self, steps, more):
        if self.joules0 is None:
            return {}
        while time.monotonic() - self.wall0 < self.seconds:
            more()
            steps += 1
        joules1 = self.meter.joules()
        if joules1 is None or joules1 <= self.joules0:
            return {}
        joules = joules1 - self.joules0
        return {"joules": joules / steps, "watts": joules / (time.monotonic() - self.wall0), "steps": steps}


def l2_flush_buffer():
    """The buffer written before each timed step: twice the L2 (at least 64 MiB), so no step starts warm."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return torch.empty(2 * max(props.L2_cache_size, 32 << 20), dtype=torch.uint8, device="cuda")


def time_steps(step, timed, flush, before_step=None, energy_window=0.0, energy=None, warmup_s=0.0):
    """Median ms of `timed` steps after 3 warm-ups; L2 evicted (and before_step() run) ahead of each.

    With warmup_s > 0, more warm-up steps until that many seconds have passed, so the timed steps
    run in the GPU's sustained (power-capped) state, as detmoe_perf_layer --warmup-seconds does.
    With energy_window > 0 and a dict `energy`, also fills energy["joules_per_step"] and
    energy["avg_watts"] over the timed steps and as many more as fit in the window (seconds)."""
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t0 = time.monotonic()
    i = 0
    while time.monotonic() - t0 < warmup_s:
        flush.fill_(i & 0xFF)
        i += 1
        if before_step is not None:
            before_step()
        step()
        torch.cuda.synchronize()
    window = EnergyWindow(energy_window if energy is not None else 0.0)
    times = []
    for i in range(timed):
        flush.fill_(i & 0xFF)
        if before_step is not None:
            before_step()
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    extra = [timed]

    def more():
        flush.fill_(extra[0] & 0xFF)
        extra[0] += 1
        if before_step is not None:
            before_step()
        step()
        torch.cuda.synchronize()

    figures = window.finish(timed, more)
    if figures:
        energy.update(joules_per_step=figures["joules"], avg_watts=figures["watts"], energy_steps=figures["steps"])
    return statistics.median(times), min(times), max(times)


def make_case(name, routing, seed):
    """The timed problem of one shape and routing: (x, w13, w2, dout, topk_idx, topk_w), the
    differentiable ones with requires_grad set. Scaled like detmoe's data: weights ~ 1/sqrt(fan_in),
    so activations stay O(1). perf/torch_op_bench.py times the DetMoE op on the same tensors."""
    T, H, Fdim, E, k = SHAPES[name]
    dev, bf16 = "cuda", torch.bfloat16
    gen = torch.Generator(device=dev).manual_seed(seed)
    x = torch.randn(T, H, device=dev, dtype=bf16, generator=gen)
    w13 = (torch.randn(E, 2 * Fdim, H, device=dev, dtype=bf16, generator=gen) * H ** -0.5).requires_grad_()
    w2 = (torch.randn(E, H, Fdim, device=dev, dtype=bf16, generator=gen) * Fdim ** -0.5).requires_grad_()
    dout = torch.randn(T, H, device=dev, dtype=bf16, generator=gen)
    topk_idx, topk_w = make_routing(T, E, k, routing, gen)
    return x.requires_grad_(), w13, w2, dout, topk_idx, topk_w.requires_grad_()


def run_case(name, routing, timed, seed, flush, passes, energy_window=1.0, warmup_s=0.0):
    T, H, Fdim, E, k = SHAPES[name]
    x, w13, w2, dout, topk_idx, topk_w = make_case(name, routing, seed)
    fwd_flops = 6.0 * T * k * H * Fdim
    results = []

    def fwd():
        with torch.no_grad():
            moe_forward(x, topk_idx, topk_w, w13, w2, E)

    def fwd_bwd():
        for t in (x, w13, w2, topk_w):
            t.grad = None
        out = moe_forward(x, topk_idx, topk_w, w13, w2, E)
        out.backward(dout)

    for pass_name, step, flops in (("fwd", fwd, fwd_flops), ("fwd+bwd", fwd_bwd, 3 * fwd_flops)):
        if pass_name not in passes:
            continue
        energy = {}
        med, lo, hi = time_steps(step, timed, flush, energy_window=energy_window, energy=energy, warmup_s=warmup_s)
        results.append({"shape": name, "routing": routing, "pass": pass_name, "median_ms": med, "min_ms": lo,
                        "max_ms": hi, "tflops": flops / (med * 1e-3) / 1e12, "timed": timed, **energy})
        joules = f"  {energy['joules_per_step']:.3f} J/step  {energy['avg_watts']:.0f} W" if energy else ""
        print(f"torch {name:<14} {routing:<9} {pass_name:<8} {med:9.3f} ms  {results[-1]['tflops']:7.1f} TFLOP/s{joules}",
              flush=True)
    del x, w13, w2, dout
    torch.cuda.empty_cache()
    return results


def parse_pipeline_args(description):
    """The command line shared by this script and torch_moe_ep_pipeline.py."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--routings", default="balanced,zipf1")
    ap.add_argument("--timed", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--passes", default="fwd,fwd+bwd", help="which of fwd, fwd+bwd to time")
    ap.add_argument("--json", required=True)
    ap.add_argument("--energy-window", type=float, default=1.0,
                    help="seconds of steps the NVML energy figure covers (0: off)")
    ap.add_argument("--warmup-seconds", type=float, default=0.0,  # torch_moe_ep_pipeline.py ignores it
                    help="warm-up steps until this many seconds have passed (the power-capped steady state)")
    return ap.parse_args()


def main():
    args = parse_pipeline_args(__doc__.splitlines()[0])
    if not torch.cuda.is_available():
        print("torch_moe_pipeline: no CUDA device", file=sys.stderr)
        return 3
    props = torch.cuda.get_device_properties(0)
    flush = l2_flush_buffer()
    results = []
    for name in args.shapes.split(","):
        for routing in args.routings.split(","):
            results.extend(run_case(name, routing, args.timed, args.seed, flush, args.passes.split(","),
                                    args.energy_window, args.warmup_seconds))
    with open(args.json, "w") as f:
        json.dump({"schema": "detmoe.torch_pipeline/1", "torch": torch.__version__, "gpu": props.name,
                   "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
