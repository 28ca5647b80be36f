"""BUG: none
STYLE: every query against a block of keys at a time, d2l's sequence mask, float64 inside
"""
"""Memory-bounded additive attention: all queries against a block of keys at a time, in float64,
cast back to the inputs' dtype.

The key block holds max(1, max_elements // (B*Tq*h)) keys, so the feature tensor has at most
max(max_elements, B*Tq*h) elements. Masking follows d2l's sequence_mask, with a finite fill and
the masked entries zeroed after the exponential.
"""
import torch
import torch.nn.functional as F


def sequence_mask(valid_lens, B, Tq, Tk, device):
    if valid_lens is None:
        return torch.ones(1, 1, Tk, dtype=torch.bool, device=device)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens.reshape(B, 1)
    return torch.arange(Tk, device=device).reshape(1, 1, Tk) < valid_lens.reshape(B, -1, 1)


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2 ** 20):
    h = W_k.shape[0]
    if max_elements < h:
        raise ValueError("max_elements must be at least the attention dimension")
    f64 = torch.float64
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    qh = F.linear(queries.to(f64), W_q.to(f64))
    kh = F.linear(keys.to(f64), W_k.to(f64))
    wv = w_v.to(f64)
    block = max(1, max_elements // (B * Tq * h))
    parts = []
    for j0 in range(0, Tk, block):
        feats = torch.tanh(qh.unsqueeze(2) + kh[:, j0:j0 + block].unsqueeze(1))   # (B, Tq, kb, h)
        parts.append(F.linear(feats, wv).squeeze(-1))
    scores = torch.cat(parts, dim=-1)
    mask = sequence_mask(valid_lens, B, Tq, Tk, queries.device).expand(B, Tq, Tk)
    fill = torch.finfo(f64).min
    masked = scores.masked_fill(~mask, fill)
    e = torch.exp(masked - masked.max(dim=-1, keepdim=True).values) * mask
    denom = e.sum(-1, keepdim=True)
    weights = e / denom.masked_fill(denom == 0, 1.0)
    out = torch.bmm(weights, values.to(f64))
    return out.to(queries.dtype), weights.to(queries.dtype)
