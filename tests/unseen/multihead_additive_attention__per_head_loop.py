"""BUG: none
STYLE: a readable per-head loop (head n slices rows n*h:(n+1)*h of the projections and uses w_v[n]); masked softmax with a finite finfo.min fill, multiplied by the mask so empty rows are exactly 0.
"""
import torch
import torch.nn.functional as F
from torch import nn


def _valid_mask(valid_lens, B, Tq, Tk, device):
    if valid_lens is None:
        return None
    lens = valid_lens.to(device)
    if lens.ndim == 1:
        lens = lens.unsqueeze(1).expand(B, Tq)
    return torch.arange(Tk, device=device).view(1, 1, Tk) < lens.unsqueeze(-1)


def _masked_softmax(scores, mask):
    if mask is None:
        return F.softmax(scores, dim=-1)
    filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return F.softmax(filled, dim=-1) * mask.to(scores.dtype)


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.H = num_heads
        self.h = attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.randn(num_heads, attn_dim) / attn_dim ** 0.5)
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.drop = nn.Dropout(p=dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        q_proj = self.W_q(queries)
        k_proj = self.W_k(keys)
        mask = _valid_mask(valid_lens, B, Tq, Tk, queries.device)
        all_weights, contexts = [], []
        for n in range(self.H):
            q_n = q_proj[..., n * self.h:(n + 1) * self.h]  # (B, Tq, h)
            k_n = k_proj[..., n * self.h:(n + 1) * self.h]  # (B, Tk, h)
            feat = torch.tanh(q_n[:, :, None, :] + k_n[:, None, :, :])  # (B, Tq, Tk, h)
            s_n = feat @ self.w_v[n]  # (B, Tq, Tk)
            w_n = _masked_softmax(s_n, mask)
            all_weights.append(w_n)
            contexts.append(torch.bmm(self.drop(w_n), values))  # (B, Tq, dv)
        weights = torch.stack(all_weights, dim=1)
        output = self.W_o(torch.cat(contexts, dim=-1))
        return output, weights
