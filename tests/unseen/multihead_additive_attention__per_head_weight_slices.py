"""BUG: none
STYLE: one head at a time with F.linear on row slices of the weights
"""
"""Multi-head additive attention, one head at a time: head n takes rows n*a:(n+1)*a of W_q and
W_k (F.linear on weight slices) and w_v[n]; contexts are concatenated in head order, then W_o.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def _masked_softmax(scores, valid_lens):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    Tk = scores.shape[-1]
    vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens     # (B, 1) or (B, Tq)
    mask = (torch.arange(Tk, device=scores.device) < vl[..., None]).expand_as(scores)
    neg = torch.finfo(scores.dtype).min
    s = scores.masked_fill(~mask, neg)
    w = torch.softmax(s, dim=-1)
    return w.masked_fill(~mask, 0.0)


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.num_heads, self.attn_dim = num_heads, attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.randn(num_heads, attn_dim) / attn_dim ** 0.5)
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        a = self.attn_dim
        contexts, weights = [], []
        for n in range(self.num_heads):
            qn = F.linear(queries, self.W_q.weight[n * a:(n + 1) * a])     # (B, Tq, a)
            kn = F.linear(keys, self.W_k.weight[n * a:(n + 1) * a])        # (B, Tk, a)
            feats = torch.tanh(qn.unsqueeze(2) + kn.unsqueeze(1))          # (B, Tq, Tk, a)
            scores = feats @ self.w_v[n]                                   # (B, Tq, Tk)
            w = _masked_softmax(scores, valid_lens)
            weights.append(w)
            contexts.append(torch.bmm(self.dropout(w), values))
        context = torch.cat(contexts, dim=-1)
        return self.W_o(context), torch.stack(weights, dim=1)
