"""Reference: the backward pass of attention, by hand (no automatic differentiation)."""
import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    """queries (..., Tq, d), keys (..., Tk, d), values (..., Tk, dv), grad_output (..., Tq, dv) ->
    the gradients of sum(O * grad_output), O = softmax(q k^T / sqrt(d)) v, with respect to queries, keys, values."""
    Tq, Tk, d = queries.shape[-2], keys.shape[-2], queries.shape[-1]
    scale = d ** -0.5
    work = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    q, k, v, do = (t.to(work) for t in (queries, keys, values, grad_output))
    s = q @ k.transpose(-2, -1) * scale  # (..., Tq, Tk)
    if is_causal:  # key j for query i when j <= i + (Tk - Tq)
        allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq)
        s = s.masked_fill(~allowed, float("-inf"))
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # rows with no allowed key
    p = torch.exp(s - m)
    total = p.sum(-1, keepdim=True)
    p = p / torch.where(total > 0, total, torch.ones_like(total))  # P; all zeros on a row with no allowed key
    o = p @ v  # the forward's output
    dv = p.transpose(-2, -1) @ do  # (..., Tk, dv)
    dp = do @ v.transpose(-2, -1)  # (..., Tq, Tk)
    delta = (do * o).sum(-1, keepdim=True)  # rowsum(dO * O) = rowsum(P * dP)
    ds = p * (dp - delta)  # through the softmax: dS = P * (dP - delta)
    dq = ds @ k * scale
    dk = ds.transpose(-2, -1) @ q * scale
    return dq.to(queries.dtype), dk.to(keys.dtype), dv.to(values.dtype)
