"""STYLE: PyTorch manual backward mirroring F.scaled_dot_product_attention(is_causal=True) (torch.tril mask)
BUG: the causal mask is torch.tril(ones(Tq, Tk)) (top-left aligned) instead of being shifted by Tk - Tq.
STAGE: dP
WHEN: is_causal with Tq != Tk
"""
import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    L, S = queries.size(-2), keys.size(-2)
    scale_factor = 1 / (queries.size(-1) ** 0.5)
    dtype = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    q, k, v, g = (t.to(dtype) for t in (queries, keys, values, grad_output))

    attn_bias = torch.zeros(L, S, dtype=dtype, device=q.device)
    if is_causal:
        temp_mask = torch.ones(L, S, dtype=torch.bool, device=q.device).tril(diagonal=0)
        attn_bias = attn_bias.masked_fill(temp_mask.logical_not(), float("-inf"))

    attn_weight = q @ k.transpose(-2, -1) * scale_factor + attn_bias
    m = attn_weight.amax(dim=-1, keepdim=True)
    m = torch.where(m == float("-inf"), torch.zeros_like(m), m)
    p = (attn_weight - m).exp()
    denom = p.sum(dim=-1, keepdim=True)
    p = p / torch.where(denom > 0, denom, torch.ones_like(denom))
    o = p @ v

    grad_v = p.transpose(-2, -1) @ g
    grad_p = g @ v.transpose(-2, -1)
    grad_s = p * (grad_p - (g * o).sum(dim=-1, keepdim=True))
    grad_q = grad_s @ k * scale_factor
    grad_k = grad_s.transpose(-2, -1) @ q * scale_factor
    return grad_q.to(queries.dtype), grad_k.to(keys.dtype), grad_v.to(values.dtype)
