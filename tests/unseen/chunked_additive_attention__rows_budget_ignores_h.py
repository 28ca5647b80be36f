"""BUG: a chunk of max_elements // Tk rows, forgetting the h features: past the memory bound
STYLE: rows by budget
"""
"""Additive attention, query rows in chunks to bound memory.

BUG: the number of rows per chunk is max_elements // Tk: it budgets the (rows, Tk) scores and
forgets that the tanh features are (rows, Tk, h). Values are right, but the feature tensor
exceeds max(max_elements, S) whenever several rows fit in the wrong budget.
"""
import torch


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2 ** 20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError("max_elements < h")
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    q = queries @ W_q.T
    k = keys @ W_k.T
    rows = max(1, max_elements // Tk)
    chunks = []
    for i0 in range(0, Tq, rows):
        f = torch.tanh(q[:, i0:i0 + rows, None, :] + k[:, None, :, :])     # (B, rows, Tk, h)
        chunks.append((f @ w_v.T).squeeze(-1))
    scores = torch.cat(chunks, dim=1)
    if valid_lens is not None:
        vl = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(B, Tq)
        keep = torch.arange(Tk, device=queries.device) < vl[..., None]
    else:
        keep = torch.ones(B, Tq, Tk, dtype=torch.bool, device=queries.device)
    s = scores.masked_fill(~keep, float("-inf"))
    m = s.max(-1, keepdim=True).values
    m = m.masked_fill(torch.isinf(m), 0.0)
    p = torch.exp(s - m)
    z = p.sum(-1, keepdim=True)
    w = p / z.masked_fill(z == 0, 1.0)
    return w @ values, w
