"""BUG: multiplies the keys by W_k as if it were (dk, h) instead of applying nn.Linear layout (h, dk); wrong values when dk == h, a shape error otherwise.
STAGE: the key projection
"""
import torch
import torch.nn.functional as F

from .masked_softmax import masked_softmax


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    dv = values.shape[-1]
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError(f"max_elements={max_elements} is smaller than the attention size h={h}")

    # the allocation budget the contract allows
    sizes = [queries.numel(), keys.numel(), values.numel(), W_q.numel(), W_k.numel(), w_v.numel(),
             B * Tq * Tk, B * Tq * dv, B * Tq * h, B * Tk * h]
    if valid_lens is not None:
        sizes.append(valid_lens.numel())
    budget = max(max_elements, *sizes)

    q_proj = F.linear(queries, W_q)  # (B, Tq, h)
    k_proj = keys @ W_k  # (B, Tk, h)

    # a tile (B, tq, tk, h) must fit in the budget; B * h <= B * Tq * h <= budget
    tk = max(1, min(Tk, budget // (B * h)))
    tq = max(1, min(Tq, budget // (B * tk * h)))

    rows = []
    for i in range(0, Tq, tq):
        q_tile = q_proj[:, i:i + tq]
        cols = []
        for j in range(0, Tk, tk):
            feats = torch.tanh(q_tile.unsqueeze(2) + k_proj[:, j:j + tk].unsqueeze(1))  # (B, tq, tk, h)
            cols.append(F.linear(feats, w_v).squeeze(-1))  # (B, tq, tk)
            del feats
        rows.append(torch.cat(cols, dim=2) if len(cols) > 1 else cols[0])
    scores = torch.cat(rows, dim=1) if len(rows) > 1 else rows[0]

    attention_weights = masked_softmax(scores, valid_lens)
    return torch.bmm(attention_weights, values), attention_weights
