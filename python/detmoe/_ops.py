"""torch.library registration of the detmoe ops: the compiled schemas and kernels come from
_detmoe_ops.so (python/csrc); here are their fake (meta) implementations, for torch.compile and
FakeTensorMode, and their autograd formula. Argument checks live in _checks.py, shared by the
fake implementations and the public functions, so a bad argument fails the same way eagerly,
under torch.compile and on fake tensors."""
import os

import torch

from . import _checks

_LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_detmoe_ops.so")
if not os.path.exists(_LIBRARY):
    raise ImportError(
        f"detmoe: the compiled op {_LIBRARY} is missing; build it with "
        "`ci/install-torch-op.sh /path/to/python` (or configure CMake with -DDETMOE_TORCH_PYTHON=...)")
torch.ops.load_library(_LIBRARY)


@torch.library.register_fake("detmoe::forward")
def _forward_fake(x, topk_idx, topk_w, w_gate_up, w_down, ws_gate_up, ws_down, impl, num_sms, save_h, grad_fp32,
                  save_context):
    _checks.check_inputs(x, topk_idx, topk_w, w_gate_up, w_down, ws_gate_up, ws_down)
    _checks.check_options(impl, num_sms)
    return x.new_empty(x.shape), torch.empty(1, dtype=torch.int64, device="cpu")


@torch.library.register_fake("detmoe::backward")
def _backward_fake(ctx, dout, x, topk_idx, topk_w, w_gate_up, w_down, ws_gate_up, ws_down, grad_fp32):
    T, H, F, E, k, Fs = _checks.check_inputs(x, topk_idx, topk_w, w_gate_up, w_down, ws_gate_up, ws_down)
    _checks.check_dout(dout, T, H)
    g = torch.float32 if grad_fp32 else torch.bfloat16
    return (x.new_empty((T, H)), x.new_empty((T, k), dtype=torch.float32), x.new_empty((E, 2 * F, H), dtype=g),
            x.new_empty((E, H, F), dtype=g), x.new_empty((2 * Fs, H), dtype=g), x.new_empty((H, Fs), dtype=g))


def _setup_context(ctx, inputs, output):
    x, topk_idx, topk_w, w_gate_up, w_down, ws_gate_up, ws_down, _impl, _num_sms, _save_h, grad_fp32, save_context = inputs
    _out, handle = output
    ctx.save_for_backward(handle, x, topk_idx, topk_w, w_gate_up, w_down, ws_gate_up, ws_down)
    ctx.grad_fp32 = grad_fp32
    ctx.save_context = save_context
    ctx.mark_non_differentiable(handle)


def _backward(ctx, dout, _dhandle):
    handle, x, topk_idx, topk_w, w_gate_up, w_down, ws_gate_up, ws_down = ctx.saved_tensors
    if not ctx.save_context:
        raise RuntimeError("detmoe: this forward ran with save_context=False, so it kept nothing for a backward")
    d_x, d_w, dw_gate_up, dw_down, dws_gate_up, dws_down = torch.ops.detmoe.backward(
        handle, dout.contiguous(), x, topk_idx, topk_w, w_gate_up, w_down, ws_gate_up, ws_down, ctx.grad_fp32)
    # A gradient takes its tensor's dtype: fp32 master weights get the fp32 gradient as computed.
    shared = (None, None) if ws_gate_up is None else (dws_gate_up.to(ws_gate_up.dtype), dws_down.to(ws_down.dtype))
    return (d_x, None, d_w.to(topk_w.dtype), dw_gate_up.to(w_gate_up.dtype), dw_down.to(w_down.dtype), *shared,
            None, None, None, None, None)


torch.library.register_autograd("detmoe::forward", _backward, setup_context=_setup_context)
