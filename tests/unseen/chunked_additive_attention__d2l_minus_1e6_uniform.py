"""BUG: d2l's -1e6 fill: rows with valid_len 0 come out uniform
STYLE: d2l.ai
"""
"""Chunked additive attention with d2l.ai's masked_softmax (sequence_mask with value=-1e6).

Queries are taken in chunks that fit in max_elements.

BUG: d2l fills masked scores with -1e6, so a row with valid_len == 0 (every key masked) gets a
uniform softmax (1/Tk each) instead of all zeros. Only valid_lens with a 0 show it.
"""
import torch
from torch.nn import functional as F


def sequence_mask(X, valid_len, value=0):
    maxlen = X.size(1)
    mask = torch.arange(maxlen, dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    return torch.where(mask, X, torch.full_like(X, value))


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return F.softmax(X.reshape(shape), dim=-1)


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2 ** 20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError("max_elements must be >= h")
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    q, k = F.linear(queries, W_q), F.linear(keys, W_k)
    rows = max(1, max_elements // (B * Tk * h))
    scores = []
    if rows >= 1 and B * Tk * h <= max_elements:
        for i in range(0, Tq, rows):
            feat = torch.tanh(q[:, i:i + rows].unsqueeze(2) + k.unsqueeze(1))
            scores.append(F.linear(feat, w_v).squeeze(-1))
    else:
        for i in range(Tq):
            row = [F.linear(torch.tanh(q[:, i:i + 1] + k[:, j:j + 1]), w_v).reshape(B, 1) for j in range(Tk)]
            scores.append(torch.cat(row, 1).unsqueeze(1))
    scores = torch.cat(scores, 1)
    attention_weights = masked_softmax(scores, valid_lens)
    return torch.bmm(attention_weights, values), attention_weights
