"""BUG: none
STYLE: as many query rows as max_elements holds, key chunks within one row otherwise, preallocated scores
"""
"""Additive (Bahdanau) attention without the (B, Tq, Tk, h) tensor.

Projections once; then the tanh features are built for as many query rows as fit in
max_elements ((rows, Tk, h) at a time), or, when even one row does not fit, for one query row
against max_elements // h keys at a time. Scores go into a preallocated (B, Tq, Tk) tensor.
"""
import torch


def _valid_mask(valid_lens, B, Tq, Tk, device):
    if valid_lens is None:
        return None
    vl = valid_lens.to(device)
    if vl.dim() == 1:
        vl = vl[:, None]
    return torch.arange(Tk, device=device)[None, None, :] < vl[:, :, None]


def _masked_softmax(scores, mask):
    if mask is None:
        return torch.softmax(scores, dim=-1)
    mask = mask.expand_as(scores)
    filled = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    mx = filled.amax(-1, keepdim=True)
    mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx)).detach()
    e = torch.where(mask, torch.exp(filled - mx), torch.zeros_like(scores))
    s = e.sum(-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2 ** 20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError(f"max_elements={max_elements} is smaller than the attention size h={h}")
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    qp = queries @ W_q.t()          # (B, Tq, h)
    kp = keys @ W_k.t()             # (B, Tk, h)
    w = w_v[0]                      # (h,)
    scores = queries.new_empty(B, Tq, Tk)
    per_row = Tk * h
    if per_row <= max_elements:
        rows = max_elements // per_row
        for b in range(B):
            for i0 in range(0, Tq, rows):
                i1 = min(i0 + rows, Tq)
                feat = torch.tanh(qp[b, i0:i1, None, :] + kp[b, None, :, :])   # (r, Tk, h)
                scores[b, i0:i1] = feat @ w
    else:
        step = max_elements // h
        for b in range(B):
            for i in range(Tq):
                for j0 in range(0, Tk, step):
                    j1 = min(j0 + step, Tk)
                    scores[b, i, j0:j1] = torch.tanh(qp[b, i] + kp[b, j0:j1]) @ w
    weights = _masked_softmax(scores, _valid_mask(valid_lens, B, Tq, Tk, queries.device))
    return torch.bmm(weights, values), weights
