"""DetMoE from PyTorch: a deterministic mixture-of-experts layer (forward and backward) for
NVIDIA Hopper, bitwise reproducible run to run, across SM counts, and per token whatever else is
in the batch (docs/PYTORCH.md).

    out = detmoe.moe(x, topk_idx, topk_w, w_gate, w_up, w_down)        # nn.Linear layouts
    layer = detmoe.MoE(hidden, intermediate, experts, top_k).cuda()      # out = layer(x, topk_idx, topk_w)

The op runs on the current CUDA stream, allocates through the torch caching allocator and keeps
each layer's workspace cached per shape and device (detmoe.release_idle_layers() frees the idle
ones). It is registered with torch.library (torch.ops.detmoe.forward / backward), so it works
under torch.compile(fullgraph=True); a no-grad forward can be captured in a CUDA graph.
"""
import math

import torch

from . import _checks, _ops  # noqa: F401  (_ops loads and registers the compiled op)

__all__ = ["moe", "moe_stacked", "MoE", "resolve_impl", "synchronize", "release_idle_layers", "describe_pool"]


def moe_stacked(x, topk_idx, topk_w, w_gate_up, w_down, shared_gate_up=None, shared_down=None, *, impl="auto",
                grad_dtype=None, save_h=True, num_sms=0):
    """The layer with the gate and up projections stacked (no copy): w_gate_up [E, 2F, H] (rows
    0..F-1 of expert e = W_gate[e], rows F..2F-1 = W_up[e]), w_down [E, H, F]; the shared expert
    as shared_gate_up [2Fs, H] and shared_down [H, Fs]. x [T, H] bf16, topk_idx [T, k] int32 or
    int64, topk_w [T, k]. Returns out [T, H] bf16. Weights may be bf16 or fp32 (fp32 master weights
    are rounded to bf16 inside the op, and their gradient arrives in fp32)."""
    # The compiled op checks the tensors too, but an error it raised from its CUDA kernel crashed
    # the process on the H200 (docs/PYTORCH.md, "Known defects"): every argument rule is checked
    # here first, once per signature (shapes, dtypes, device), so a bad call raises in Python.
    # Skipped while torch.compile traces (fake tensors have no address; the op checks at run time).
    if not torch.compiler.is_compiling():
        _checks.check_inputs_once(x, topk_idx, topk_w, w_gate_up, w_down, shared_gate_up, shared_down)
        _checks.check_layout((("x", x), ("w_gate_up", w_gate_up), ("w_down", w_down), ("ws_gate_up", shared_gate_up),
                              ("ws_down", shared_down)))
    if grad_dtype is None:
        grad_dtype = w_gate_up.dtype if isinstance(w_gate_up, torch.Tensor) else torch.float32
    _checks.check_options(impl, num_sms, grad_dtype)
    tensors = (x, topk_w, w_gate_up, w_down, shared_gate_up, shared_down)
    needs_grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)
    out, _ctx = torch.ops.detmoe.forward(x, topk_idx, topk_w, w_gate_up, w_down, shared_gate_up, shared_down, impl,
                                         num_sms, save_h, grad_dtype == torch.float32, needs_grad)
    return out


def moe(x, topk_idx, topk_w, w_gate, w_up, w_down, shared=None, *, impl="auto", grad_dtype=None,
        save_h=True, num_sms=0):
    """The MoE layer with weights in nn.Linear layouts: w_gate, w_up [E, F, H], w_down [E, H, F];
    shared = (ws_gate [Fs, H], ws_up [Fs, H], ws_down [H, Fs]) or None.

    out[t] = Σ_j topk_w[t, j] · W_down[e]·(silu(W_gate[e]·x[t]) ⊙ W_up[e]·x[t]), e = topk_idx[t, j],
    plus the shared expert; the contract's rounding points are in docs/NUMERICS.md.

    This stacks w_gate and w_up (one copy per call); detmoe.MoE and moe_stacked() hold them
    stacked and copy nothing. impl: "auto" (the fastest path whose bits are the contract's: the
    reference for training, the megakernel forward where it is faster or under CUDA-graph
    capture), "reference" or "megakernel" (the fused forward and backward). grad_dtype: the precision the
    weight gradients are computed in, torch.float32 or torch.bfloat16; None (default) = the
    weights' dtype. A gradient reaches its weight in the weight's dtype (torch's rule), so
    fp32 gradients for bf16 weights would be computed and then rounded by torch: on gpt-oss-120b
    that rounding alone cost 4.5 ms of a 27 ms step (docs/PYTORCH.md). num_sms: SMs the megakernel may use (0 = all; bits never
    change with it)."""
    for name, w in (("w_gate", w_gate), ("w_up", w_up)):
        if not isinstance(w, torch.Tensor) or w.dim() != 3:
            _checks._fail(f"{name} must be a 3-dimensional tensor [E, F, H]")
    if w_gate.shape != w_up.shape:
        _checks._fail(f"w_gate {list(w_gate.shape)} and w_up {list(w_up.shape)} differ in shape")
    w_gate_up = torch.cat((w_gate, w_up), dim=1)
    shared_gate_up = shared_down = None
    if shared is not None:
        if len(shared) != 3:
            _checks._fail(f"shared has {len(shared)} tensors; expected (ws_gate, ws_up, ws_down)")
        ws_gate, ws_up, shared_down = shared
        if ws_gate.shape != ws_up.shape:
            _checks._fail(f"ws_gate {list(ws_gate.shape)} and ws_up {list(ws_up.shape)} differ in shape")
        shared_gate_up = torch.cat((ws_gate, ws_up), dim=0)
    return moe_stacked(x, topk_idx, topk_w, w_gate_up, w_down, shared_gate_up, shared_down, impl=impl,
                       grad_dtype=grad_dtype, save_h=save_h, num_sms=num_sms)


class MoE(torch.nn.Module):
    """The DetMoE layer's weights as parameters: w_gate_up [E, 2F, H] (W_gate[e] then W_up[e],
    each in nn.Linear's [out, in] layout), w_down [E, H, F], and for a shared expert
    ws_gate_up [2Fs, H], ws_down [H, Fs]. forward(x, topk_idx, topk_w) -> out; the router is
    the caller's. Parameters default to fp32 (master weights; the op computes in bf16)."""

    def __init__(self, hidden, intermediate, experts, top_k, shared_intermediate=0, *, impl="auto",
                 grad_dtype=None, save_h=True, num_sms=0, device=None, dtype=torch.float32):
        super().__init__()
        _checks.check_options(impl, num_sms, dtype if grad_dtype is None else grad_dtype)
        for name, v in (("hidden", hidden), ("intermediate", intermediate), ("experts", experts), ("top_k", top_k)):
            if not isinstance(v, int) or v < 1:
                _checks._fail(f"{name} = {v!r}; expected an int >= 1")
        if top_k > experts:
            _checks._fail(f"top_k = {top_k} exceeds experts = {experts}")
        if not isinstance(shared_intermediate, int) or shared_intermediate < 0:
            _checks._fail(f"shared_intermediate = {shared_intermediate!r}; expected an int >= 0")
        self.hidden, self.intermediate, self.experts, self.top_k = hidden, intermediate, experts, top_k
        self.shared_intermediate = shared_intermediate
        self.impl, self.grad_dtype, self.save_h, self.num_sms = impl, grad_dtype, save_h, num_sms
        f = dict(device=device, dtype=dtype)
        self.w_gate_up = torch.nn.Parameter(torch.empty(experts, 2 * intermediate, hidden, **f))
        self.w_down = torch.nn.Parameter(torch.empty(experts, hidden, intermediate, **f))
        if shared_intermediate:
            self.ws_gate_up = torch.nn.Parameter(torch.empty(2 * shared_intermediate, hidden, **f))
            self.ws_down = torch.nn.Parameter(torch.empty(hidden, shared_intermediate, **f))
        else:
            self.register_parameter("ws_gate_up", None)
            self.register_parameter("ws_down", None)
        self.reset_parameters()

    def reset_parameters(self):
        # nn.Linear's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) per projection.
        for w in (self.w_gate_up, self.w_down, self.ws_gate_up, self.ws_down):
            if w is not None:
                bound = 1.0 / math.sqrt(w.shape[-1])
                torch.nn.init.uniform_(w, -bound, bound)

    @property
    def w_gate(self):
        return self.w_gate_up[:, : self.intermediate]

    @property
    def w_up(self):
        return self.w_gate_up[:, self.intermediate:]

    def forward(self, x, topk_idx, topk_w):
        return moe_stacked(x, topk_idx, topk_w, self.w_gate_up, self.w_down, self.ws_gate_up, self.ws_down,
                           impl=self.impl, grad_dtype=self.grad_dtype, save_h=self.save_h, num_sms=self.num_sms)

    def extra_repr(self):
        return (f"hidden={self.hidden}, intermediate={self.intermediate}, experts={self.experts}, top_k={self.top_k}, "
                f"shared_intermediate={self.shared_intermediate}, impl={self.impl!r}")


def resolve_impl(T, H, F, E, k, Fs=0, *, impl="auto", backward=False, capturing=False):
    """The path impl picks for these sizes: "reference" or "megakernel"."""
    _checks.check_options(impl, 0)
    return torch.ops.detmoe.resolve_impl(T, H, F, E, k, Fs, impl, backward, capturing)


def synchronize():
    """Waits for every cached megakernel layer's last launch and raises the first device fault
    it recorded (an expert id out of range, a spin-wait timeout): the megakernel path never
    waits on its own, so such faults surface here (the reference path raises at the call)."""
    torch.ops.detmoe.synchronize()


def release_idle_layers():
    """Frees the workspaces of every cached layer not held by a pending backward."""
    torch.ops.detmoe.release_idle_layers()


def describe_pool():
    return torch.ops.detmoe.describe_pool()
