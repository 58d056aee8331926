#!/usr/bin/env python3
"""The PyTorch expert-parallel MoE baseline (issue 7): torch.distributed all_to_all_single +
torch._grouped_mm, one process per GPU, timed like perf/torch_moe_pipeline.py.

Run so far on one GPU only (`torchrun --nproc_per_node=1`, H200, 2026-12-02, balanced, median of
10; results/torch_ep_pipeline_h200_p1.json beside torch_moe_pipeline.py in the same call):
qwen3 fwd 6.82 ms (single-GPU pipeline 4.65), fwd+bwd 16.37 (12.55); gpt-oss fwd 10.03 (8.43),
fwd+bwd 31.16 (28.79). The gap is presumably the EP bookkeeping at P = 1 (host split sizes, two extra stable
sorts, the all_to_all copies; not profiled). Not yet run on a node (no multi-GPU
machine lent).

Per rank (T tokens, E experts in total, E/P local; DESIGN.md §7 shapes are per GPU):
routing → sort (token, slot) pairs by destination rank (stable) → all_to_all of the split sizes
→ all_to_all_single of x rows and of their global expert ids → stable sort of the received rows
by local expert → grouped GEMM [W_gate; W_up] → SwiGLU → grouped GEMM W_down → unsort →
all_to_all_single back → un-permute to [T, k, H] → weighted sum over the k slots (bmm, fp32
accumulation). Backward through autograd (torch.distributed.nn.functional.all_to_all_single is
differentiable). The split sizes go through the host (.tolist()), as in the usual EP pipelines.

  torchrun --nproc_per_node=P perf/torch_moe_ep_pipeline.py --json out.json [--shapes ...]

Writes (rank 0) {"schema": "detmoe.torch_ep_pipeline/1", "torch", "gpu", "world_size",
"results": [{"shape", "routing", "pass", "median_ms" (max over ranks of each rank's median),
"rank_median_ms", "tflops" (per GPU), "timed"}]}.
"""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
import torch.nn.functional as F

from torch_moe_pipeline import SHAPES, l2_flush_buffer, make_routing, parse_pipeline_args, time_steps


def a2a(x, out_splits, in_splits):
    out = x.new_empty((sum(out_splits),) + tuple(x.shape[1:]))
    return dist_fn.all_to_all_single(out, x, out_splits, in_splits)


def moe_ep_forward(x, topk_idx, topk_w, w13, w2, E, P):
    T, k = topk_idx.shape
    e_local = E // P
    Fdim = w2.shape[2]
    flat = topk_idx.reshape(-1)
    order = torch.argsort(flat, stable=True)  # by expert = by destination rank, then token
    send_counts = torch.bincount(flat // e_local, minlength=P)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    in_splits, out_splits = send_counts.tolist(), recv_counts.tolist()
    xs = a2a(x[order // k], out_splits, in_splits)
    experts = torch.empty(sum(out_splits), dtype=flat.dtype, device=flat.device)
    dist.all_to_all_single(experts, flat[order].contiguous(), out_splits, in_splits)
    local = experts - dist.get_rank() * e_local
    lorder = torch.argsort(local, stable=True)
    offs = torch.cumsum(torch.bincount(local, minlength=e_local), 0).to(torch.int32)
    h = torch._grouped_mm(xs[lorder], w13.transpose(-2, -1), offs=offs)
    g, u = h[:, :Fdim], h[:, Fdim:]
    y_local = torch._grouped_mm(F.silu(g) * u, w2.transpose(-2, -1), offs=offs)
    y_recv = torch.empty_like(y_local).index_copy(0, lorder, y_local)
    y_sent = a2a(y_recv, in_splits, out_splits)
    y_slots = torch.empty_like(y_sent).index_copy(0, order, y_sent).view(T, k, -1)
    return torch.bmm(topk_w.to(y_slots.dtype).unsqueeze(1), y_slots).squeeze(1)


def run_case(name, routing, timed, seed, flush, passes, P):
    T, H, Fdim, E, k = SHAPES[name]
    if E % P:
        raise SystemExit(f"{name}: E = {E} is not divisible by P = {P}")
    dev, bf16 = "cuda", torch.bfloat16
    gen = torch.Generator(device=dev).manual_seed(seed + 1000 * dist.get_rank())
    x = torch.randn(T, H, device=dev, dtype=bf16, generator=gen).requires_grad_()
    w13 = (torch.randn(E // P, 2 * Fdim, H, device=dev, dtype=bf16, generator=gen) * H ** -0.5).requires_grad_()
    w2 = (torch.randn(E // P, H, Fdim, device=dev, dtype=bf16, generator=gen) * Fdim ** -0.5).requires_grad_()
    dout = torch.randn(T, H, device=dev, dtype=bf16, generator=gen)
    topk_idx, topk_w = make_routing(T, E, k, routing, gen)
    topk_w.requires_grad_()
    fwd_flops = 6.0 * T * k * H * Fdim

    def fwd():
        with torch.no_grad():
            moe_ep_forward(x, topk_idx, topk_w, w13, w2, E, P)

    def fwd_bwd():
        for t in (x, w13, w2, topk_w):
            t.grad = None
        moe_ep_forward(x, topk_idx, topk_w, w13, w2, E, P).backward(dout)

    results = []
    for pass_name, step, flops in (("fwd", fwd, fwd_flops), ("fwd+bwd", fwd_bwd, 3 * fwd_flops)):
        if pass_name not in passes:
            continue
        med = torch.tensor([time_steps(step, timed, flush, before_step=dist.barrier)[0]], device=dev)
        worst = med.clone()
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        results.append({"shape": name, "routing": routing, "pass": pass_name, "median_ms": worst.item(),
                        "rank_median_ms": med.item(), "tflops": flops / (worst.item() * 1e-3) / 1e12, "timed": timed})
        if dist.get_rank() == 0:
            print(f"torch-ep P={P} {name:<14} {routing:<9} {pass_name:<8} {worst.item():9.3f} ms "
                  f"{results[-1]['tflops']:7.1f} TFLOP/s per GPU", flush=True)
    return results


def main():
    args = parse_pipeline_args(__doc__.splitlines()[0])
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        raise SystemExit("set NCCL_NVLS_ENABLE=0 (multicast objects are not to be created on these machines)")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    P = dist.get_world_size()
    props = torch.cuda.get_device_properties(local_rank)
    flush = l2_flush_buffer()
    results = []
    for name in args.shapes.split(","):
        for routing in args.routings.split(","):
            results.extend(run_case(name, routing, args.timed, args.seed, flush, args.passes.split(","), P))
    if dist.get_rank() == 0:
        with open(args.json, "w") as f:
            json.dump({"schema": "detmoe.torch_ep_pipeline/1", "torch": torch.__version__, "gpu": props.name,
                       "world_size": P, "results": results}, f, indent=2)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
