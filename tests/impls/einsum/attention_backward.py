"""Attention backward with einsum, delta as rowsum(P * dP)."""
import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    Tq, Tk, d = queries.shape[-2], keys.shape[-2], queries.shape[-1]
    s = torch.einsum("...qd,...kd->...qk", queries, keys) / d ** 0.5
    if is_causal:
        keep = torch.ones(Tq, Tk, dtype=torch.bool, device=queries.device).tril(diagonal=Tk - Tq)
        s = torch.where(keep, s, torch.full_like(s, float("-inf")))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # a row of -inf gives NaN: no key, no weight
    dv = torch.einsum("...qk,...qv->...kv", p, grad_output)
    dp = torch.einsum("...qv,...kv->...qk", grad_output, values)
    ds = p * (dp - (p * dp).sum(dim=-1, keepdim=True))
    dq = torch.einsum("...qk,...kd->...qd", ds, keys) / d ** 0.5
    dk = torch.einsum("...qk,...qd->...kd", ds, queries) / d ** 0.5
    return dq, dk, dv
