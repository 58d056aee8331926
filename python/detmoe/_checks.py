"""Argument checks of the detmoe op, on real and fake tensors alike: each error names the
argument and the value (the compiled op checks the same again, plus alignment and contiguity of
the real tensors)."""
import torch

IMPLS = ("auto", "reference", "megakernel")
_WEIGHT_DTYPES = (torch.bfloat16, torch.float32)


def _fail(message, kind=ValueError):
    raise kind(f"detmoe: {message}")


def _tensor(t, name, dtypes, dim, device):
    if not isinstance(t, torch.Tensor):
        _fail(f"{name} is a {type(t).__name__}; expected a torch.Tensor", TypeError)
    if t.dtype not in dtypes:
        _fail(f"{name} has dtype {t.dtype}; expected " + " or ".join(str(d) for d in dtypes), TypeError)
    if t.dim() != dim:
        _fail(f"{name} has {t.dim()} dimensions {list(t.shape)}; expected {dim}")
    if device is not None and t.device != device:
        _fail(f"{name} is on {t.device}; expected {device} (the device of x)")


def _size(t, name, d, want, what):
    if t.shape[d] != want:
        _fail(f"{name} {list(t.shape)} has size {t.shape[d]} in dimension {d}; expected {want} ({what})")


def check_inputs(x, topk_idx, topk_w, w_gate_up, w_down, ws_gate_up, ws_down):
    """Returns (T, H, F, E, k, Fs)."""
    _tensor(x, "x", (torch.bfloat16,), 2, None)
    if x.device.type not in ("cuda", "meta"):
        _fail(f"x is on {x.device}; the layer runs on a CUDA device")
    dev = x.device
    _tensor(topk_idx, "topk_idx", (torch.int32, torch.int64), 2, dev)
    _tensor(topk_w, "topk_w", (torch.float32, torch.bfloat16, torch.float16), 2, dev)
    _tensor(w_gate_up, "w_gate_up", _WEIGHT_DTYPES, 3, dev)
    _tensor(w_down, "w_down", _WEIGHT_DTYPES, 3, dev)
    T, H = x.shape
    k = topk_idx.shape[1]
    E = w_gate_up.shape[0]
    if w_gate_up.shape[1] % 2:
        _fail(f"w_gate_up {list(w_gate_up.shape)} has an odd size in dimension 1; expected 2F (gate rows, then up rows)")
    F = w_gate_up.shape[1] // 2
    _size(topk_idx, "topk_idx", 0, T, "T, the rows of x")
    _size(topk_w, "topk_w", 0, T, "T, the rows of x")
    _size(topk_w, "topk_w", 1, k, "k, the columns of topk_idx")
    _size(w_gate_up, "w_gate_up", 2, H, "H, the columns of x")
    _size(w_down, "w_down", 0, E, "E, the experts of w_gate_up")
    _size(w_down, "w_down", 1, H, "H, the columns of x")
    _size(w_down, "w_down", 2, F, "F, half the rows of w_gate_up")
    if (ws_gate_up is None) != (ws_down is None):
        _fail("the shared expert needs both ws_gate_up and ws_down (" + ("ws_down" if ws_down is None else "ws_gate_up")
              + " is None)")
    Fs = 0
    if ws_gate_up is not None:
        _tensor(ws_gate_up, "ws_gate_up", _WEIGHT_DTYPES, 2, dev)
        _tensor(ws_down, "ws_down", _WEIGHT_DTYPES, 2, dev)
        if ws_gate_up.shape[0] % 2:
            _fail(f"ws_gate_up {list(ws_gate_up.shape)} has an odd size in dimension 0; expected 2Fs")
        Fs = ws_gate_up.shape[0] // 2
        _size(ws_gate_up, "ws_gate_up", 1, H, "H, the columns of x")
        _size(ws_down, "ws_down", 0, H, "H, the columns of x")
        _size(ws_down, "ws_down", 1, Fs, "Fs, half the rows of ws_gate_up")
    _check_shape_rules(T, H, F, E, k, Fs)
    return T, H, F, E, k, Fs


def _check_shape_rules(T, H, F, E, k, Fs):
    """The layer's own shape rules (multiples of 64, ranges, k ≤ E), asked of the compiled op's
    validate(Shape) so there is one definition of them."""
    message = torch.ops.detmoe.validate_shape(T, H, F, E, k, Fs)
    if message:
        _fail(message)


_VALIDATED = set()  # signatures of calls already checked (shapes, dtypes, device): checks once each


def check_inputs_once(x, topk_idx, topk_w, w_gate_up, w_down, ws_gate_up, ws_down):
    """check_inputs for eager calls, at most once per signature: a second call of the same shapes,
    dtypes and device costs one set lookup instead of ~30 attribute checks."""
    sig = tuple(None if t is None else (tuple(t.shape), t.dtype, t.device)
                for t in (x, topk_idx, topk_w, w_gate_up, w_down, ws_gate_up, ws_down)
                if t is None or isinstance(t, torch.Tensor))
    if len(sig) == 7 and sig in _VALIDATED:
        return
    check_inputs(x, topk_idx, topk_w, w_gate_up, w_down, ws_gate_up, ws_down)
    if len(_VALIDATED) < 4096:
        _VALIDATED.add(sig)


def check_dout(dout, T, H):
    _tensor(dout, "dout", (torch.bfloat16,), 2, None)
    _size(dout, "dout", 0, T, "T, the rows of x")
    _size(dout, "dout", 1, H, "H, the columns of x")


def check_options(impl, num_sms, grad_dtype=torch.float32):
    if impl not in IMPLS:
        _fail(f"impl = {impl!r}; expected one of {', '.join(repr(i) for i in IMPLS)}")
    if not isinstance(num_sms, int) or isinstance(num_sms, bool) or num_sms < 0:
        _fail(f"num_sms = {num_sms!r}; expected an int >= 0 (0 = every SM)")
    if grad_dtype not in (torch.float32, torch.bfloat16):
        _fail(f"grad_dtype = {grad_dtype}; expected torch.float32 or torch.bfloat16", TypeError)


def check_layout(named):
    """Contiguity and 16-byte alignment of the dense tensors, checked in Python before the call.
    The compiled op checks the same, but on the H200 a ValueError raised from its CUDA kernel
    for a misaligned x crashed the process inside libtorch_python (exit 139; docs/PYTORCH.md,
    "Known defects"), so these common mistakes are caught here first, with check_inputs_once
    (shapes, dtypes, devices and the shape rules). `named`: (name, tensor). Eager calls only."""
    for name, t in named:
        if t is None or t.device.type != "cuda":
            continue
        if not t.is_contiguous():
            _fail(f"{name} {list(t.shape)} is not contiguous (strides {list(t.stride())}); pass .contiguous()")
        if t.data_ptr() % 16:
            _fail(f"{name} starts at {t.data_ptr():#x}, which is not 16-byte aligned")
