"""BUG: forgets the 1/sqrt(d) factor on dK (dQ has it).
STAGE: the gradient of the keys
"""
import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    orig = queries.dtype
    up = (lambda t: t.float()) if orig in (torch.float16, torch.bfloat16) else (lambda t: t)
    q, k, v, g = up(queries), up(keys), up(values), up(grad_output)

    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    c = d ** -0.5

    s = torch.einsum("...id,...jd->...ij", q, k) * c
    if is_causal:
        i = torch.arange(n_q, device=q.device)[:, None]
        j = torch.arange(n_k, device=q.device)[None, :]
        keep = j <= i + (n_k - n_q)
        s = torch.where(keep, s, torch.full_like(s, float("-inf")))
        row_max = s.amax(dim=-1, keepdim=True)
        row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
        e = torch.exp(s - row_max)
        z = e.sum(dim=-1, keepdim=True)
        p = e / torch.where(z > 0, z, torch.ones_like(z))
    else:
        p = torch.softmax(s, dim=-1)

    o = torch.einsum("...ij,...jv->...iv", p, v)
    dv = torch.einsum("...ij,...iv->...jv", p, g)
    dp = torch.einsum("...iv,...jv->...ij", g, v)
    delta = torch.einsum("...iv,...iv->...i", g, o).unsqueeze(-1)
    ds = p * (dp - delta)
    dq = torch.einsum("...ij,...jd->...id", ds, k) * c
    dk = torch.einsum("...ij,...id->...jd", ds, q)
    return dq.to(orig), dk.to(orig), dv.to(orig)
