#!/usr/bin/env python3
"""Trains a small MoE block with DetMoE for a few steps and prints hashes of the loss sequence
and of the final weights: rerun it (or change --num-sms) and the hashes stay the same.

Model: y = x + MoE(x) with a softmax top-k router (fp32), the DetMoE layer (fp32 master weights,
bf16 compute, optional shared expert) and a mean-squared loss against a fixed random target;
AdamW on seeded random batches. After each step a no-grad evaluation forward on a fixed batch
(small enough that impl="auto" runs it on the megakernel, where --num-sms applies).

With --pipeline-runs N (default 2) the same model is also trained with the torch._grouped_mm
pipeline layer (perf/torch_moe_pipeline.py) N times, and the script says whether those runs
were bitwise equal. Needs a Hopper GPU and `import detmoe` (ci/install-torch-op.sh).
    python examples/train_tiny_moe.py [--steps 50] [--num-sms 0] [--pipeline-runs 2]
"""
import argparse
import hashlib
import os
import sys

import torch

import detmoe

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "perf"))


def hash_of(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


class Block(torch.nn.Module):
    def __init__(self, a, layer="detmoe"):
        super().__init__()
        self.k, self.layer = a.k, layer
        self.router = torch.nn.Linear(a.H, a.E, bias=False)
        self.moe = detmoe.MoE(a.H, a.F, a.E, a.k, shared_intermediate=a.Fs, num_sms=a.num_sms)

    def route(self, x):
        top, idx = self.router(x.float()).topk(self.k, dim=-1)
        return idx, torch.softmax(top, dim=-1)

    def forward(self, x):
        idx, w = self.route(x)
        if self.layer == "detmoe":
            return x + self.moe(x, idx, w)
        from torch_moe_pipeline import moe_forward  # the torch._grouped_mm pipeline, bf16 weights
        m = self.moe
        out = moe_forward(x, idx, w, m.w_gate_up.bfloat16(), m.w_down.bfloat16(), m.experts)
        if m.ws_gate_up is not None:
            h = x @ m.ws_gate_up.bfloat16().T
            g, u = h.chunk(2, dim=-1)
            out = out + (torch.nn.functional.silu(g) * u) @ m.ws_down.bfloat16().T
        return x + out


def train(a, layer):
    torch.manual_seed(a.seed)
    model = Block(a, layer).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator(device="cpu").manual_seed(a.seed + 1)
    target_map = torch.randn(a.H, a.H, generator=gen) * a.H ** -0.5
    eval_x = torch.randn(a.eval_T, a.H, generator=gen).to(torch.bfloat16).cuda()
    losses, eval_losses = [], []
    for _ in range(a.steps):
        x = torch.randn(a.T, a.H, generator=gen)
        target = (x @ target_map).cuda()
        y = model(x.to(torch.bfloat16).cuda())
        loss = (y.float() - target).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        with torch.no_grad():
            eval_losses.append(model(eval_x).float().pow(2).mean())
    losses, eval_losses = torch.stack(losses), torch.stack(eval_losses)
    return (hash_of([losses, eval_losses]), hash_of([p for _, p in sorted(model.named_parameters())]),
            losses[-1].item(), losses[0].item())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("steps", 50), ("T", 512), ("eval-T", 256), ("H", 256), ("F", 128), ("E", 16), ("k", 4),
                          ("Fs", 64), ("seed", 0), ("num-sms", 0), ("pipeline-runs", 2)):
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--no-pipeline", action="store_true", help="skip the torch._grouped_mm pipeline runs")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("train_tiny_moe: no CUDA device", file=sys.stderr)
        return 3
    eval_impl = detmoe.resolve_impl(a.eval_T, a.H, a.F, a.E, a.k, a.Fs)
    loss_hash, weight_hash, last, first = train(a, "detmoe")
    print(f"detmoe loss_hash={loss_hash} weights_hash={weight_hash} loss {first:.5f} -> {last:.5f} "
          f"num_sms={a.num_sms} (training: reference fwd+bwd; evaluation: {eval_impl})")
    if not a.no_pipeline and a.pipeline_runs > 0:
        runs = [train(a, "pipeline") for _ in range(a.pipeline_runs)]
        for r in runs:
            print(f"pipeline loss_hash={r[0]} weights_hash={r[1]} loss {r[3]:.5f} -> {r[2]:.5f}")
        same = len({r[:2] for r in runs}) == 1
        print(f"pipeline: {a.pipeline_runs} runs bitwise {'equal' if same else 'DIFFERENT'} "
              f"(its gather backward is index_add with atomics)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
