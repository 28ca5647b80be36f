"""BUG: the query-chunk size is computed as max_elements // (Tk * h) but each chunk is evaluated for all B batch rows at once, so the feature tensor is (B, ci, Tk, h): up to B times the allowed size. Values are right; only the allocation bound is broken. Differs on: the memory check with B > 1 and max_elements >= Tk*h, e.g. B=3, Tq=32, Tk=16, h=4, max_elements=1024 allocates 3072 > max(1024, S=1536) elements.
STAGE: allocation of the (B, ci, Tk, h) feature chunk
STYLE: "chunk over queries only" memory-efficient attention, batch dimension forgotten in the budget
"""
import torch


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None,
                               max_elements=2 ** 20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError("max_elements must be >= h")
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    qh = queries @ W_q.T
    kh = keys @ W_k.T
    if max_elements >= Tk * h:
        ci = max(1, max_elements // (Tk * h))
        parts = []
        for i0 in range(0, Tq, ci):
            f = torch.tanh(qh[:, i0:i0 + ci, None, :] + kh[:, None, :, :])   # (B, ci, Tk, h)
            parts.append(f @ w_v[0])
        scores = torch.cat(parts, dim=1)
    else:
        kc = max(1, max_elements // h)
        rows = []
        for b in range(B):
            for i in range(Tq):
                cols = [torch.tanh(qh[b, i, None, :] + kh[b, j0:j0 + kc]) @ w_v[0]
                        for j0 in range(0, Tk, kc)]
                rows.append(torch.cat(cols))
        scores = torch.stack(rows).view(B, Tq, Tk)
    if valid_lens is not None:
        lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep = torch.arange(Tk, device=scores.device) < lens[..., None]
        weights = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), -1) * keep
    else:
        weights = torch.softmax(scores, -1)
    return weights @ values, weights
