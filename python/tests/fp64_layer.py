"""An fp64 MoE layer in plain torch with the contract's rounding points (DESIGN.md §2), forward
and backward written out, and the docs/NUMERICS.md §4 tolerance rule: what the op's outputs and
gradients are checked against."""
import torch
import torch.nn.functional as F


def bf16(t):
    return t.to(torch.bfloat16).to(torch.float64)


def _mlp_forward(x, w_gate_up, w_down):
    f = w_gate_up.shape[0] // 2
    g = bf16(x @ w_gate_up[:f].T)
    u = bf16(x @ w_gate_up[f:].T)
    a = bf16(F.silu(g) * u)
    return g, u, a, bf16(a @ w_down.T)


def _mlp_backward(x, dy, g, u, w_gate_up, w_down):
    f = w_gate_up.shape[0] // 2
    da = dy @ w_down
    sig = torch.sigmoid(g)
    dg = bf16(da * u * (sig * (1 + g * (1 - sig))))
    du = bf16(da * g * sig)
    dx = bf16(dg @ w_gate_up[:f] + du @ w_gate_up[f:])
    return dx, torch.cat((dg.T @ x, du.T @ x)), dy.T @ (bf16(F.silu(g) * u)), (dg, du)


def reference(x, idx, w, wgu, wd, wsgu=None, wsd=None, dout=None):
    """Returns (outputs, magnitudes): outputs out, d_x, d_topk_w, dw_gate_up, dw_down[, dws_gate_up,
    dws_down] in fp64; magnitudes Σ|terms| for the weight gradients (NUMERICS §4)."""
    d = lambda t: None if t is None else t.detach().to(torch.float64)
    x, w, wgu, wd, wsgu, wsd = d(x), d(w), bf16(d(wgu)), bf16(d(wd)), d(wsgu), d(wsd)
    if wsgu is not None:
        wsgu, wsd = bf16(wsgu), bf16(wsd)
    T, k = idx.shape
    E = wgu.shape[0]
    idx = idx.long()
    ys = torch.zeros(T, k, x.shape[1], dtype=torch.float64, device=x.device)
    saved = {}
    for e in range(E):
        t, j = (idx == e).nonzero(as_tuple=True)
        if len(t) == 0:
            continue
        g, u, a, y = _mlp_forward(x[t], wgu[e], wd[e])
        ys[t, j] = y
        saved[e] = (t, j, g, u)
    acc = (w.unsqueeze(-1) * ys).sum(1)
    if wsgu is not None:
        gs, us, _as, s = _mlp_forward(x, wsgu, wsd)
        acc = acc + s
    res = {"out": bf16(acc)}
    if dout is None:
        return res, {}
    dout = d(dout)
    dxs = torch.zeros(T, k, x.shape[1], dtype=torch.float64, device=x.device)
    dwgu, dwd = torch.zeros_like(wgu), torch.zeros_like(wd)
    mag = {"dw_gate_up": torch.zeros_like(wgu), "dw_down": torch.zeros_like(wd)}
    for e, (t, j, g, u) in saved.items():
        dy = bf16(w[t, j].unsqueeze(-1) * dout[t])
        dx, dwgu[e], dwd[e], (dg, du) = _mlp_backward(x[t], dy, g, u, wgu[e], wd[e])
        dxs[t, j] = dx
        a = bf16(F.silu(g) * u)
        mag["dw_gate_up"][e] = torch.cat((dg.abs().T @ x[t].abs(), du.abs().T @ x[t].abs()))
        mag["dw_down"][e] = dy.abs().T @ a.abs()
    dx_sum = dxs.sum(1)
    if wsgu is not None:
        dx_s, res["dws_gate_up"], res["dws_down"], (dgs, dus) = _mlp_backward(x, dout, gs, us, wsgu, wsd)
        dx_sum = dx_sum + dx_s
        mag["dws_gate_up"] = torch.cat((dgs.abs().T @ x.abs(), dus.abs().T @ x.abs()))
        mag["dws_down"] = dout.abs().T @ bf16(F.silu(gs) * us).abs()
    res.update(d_x=bf16(dx_sum), d_topk_w=(dout.unsqueeze(1) * ys).sum(-1), dw_gate_up=dwgu, dw_down=dwd)
    return res, mag


def allowance_used(got, want, magnitude=None):
    """Worst |got − want| over its allowance (≤ 1 passes): atol = 2⁻⁵·rms(want), rtol = 2⁻⁶, or
    4·2⁻⁸·Σ|terms| where a magnitude is given. NaN counts as infinitely far."""
    got, want = got.to(torch.float64), want.to(torch.float64)
    err = (got - want).abs()
    allow = 2.0 ** -5 * want.pow(2).mean().sqrt() + 2.0 ** -6 * want.abs()
    if magnitude is not None:
        allow = torch.maximum(allow, 4 * 2.0 ** -8 * magnitude)
    frac = torch.where(allow > 0, err / allow, torch.where(err > 0, torch.inf, 0.0))
    frac = torch.where(torch.isnan(got), torch.inf, frac)
    return frac.max().item()
