"""BUG: none
STYLE: explicit per-head Python loop slicing the weight matrices (F.linear on W_q.weight[n*h:(n+1)*h]), torch.cat of the head outputs; masking by masked_fill(-inf) + guarded rows computed safely
"""
import torch
import torch.nn.functional as F
from torch import nn


def _masked_softmax(scores, keep):
    # keep: bool, broadcastable to scores. Rows with no kept key give zeros, never NaN (also in backward).
    any_keep = keep.any(dim=-1, keepdim=True)
    safe_keep = keep | ~any_keep                      # empty rows: pretend all kept, zero afterwards
    w = F.softmax(scores.masked_fill(~safe_keep, float("-inf")), dim=-1)
    return w * (keep & any_keep)


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.num_heads = num_heads
        self.attn_dim = attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.empty(num_heads, attn_dim))
        nn.init.normal_(self.w_v, std=0.1)
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        h = self.attn_dim
        if valid_lens is None:
            keep = torch.ones(B, Tq, Tk, dtype=torch.bool, device=queries.device)
        elif valid_lens.dim() == 1:
            keep = (torch.arange(Tk, device=queries.device)[None, None, :] < valid_lens[:, None, None]).expand(B, Tq, Tk)
        else:
            keep = torch.arange(Tk, device=queries.device)[None, None, :] < valid_lens[:, :, None]
        outs, all_w = [], []
        for n in range(self.num_heads):
            qn = F.linear(queries, self.W_q.weight[n * h:(n + 1) * h])
            kn = F.linear(keys, self.W_k.weight[n * h:(n + 1) * h])
            e = torch.tanh(qn.unsqueeze(2) + kn.unsqueeze(1)) @ self.w_v[n]   # (B, Tq, Tk)
            w = _masked_softmax(e, keep)
            all_w.append(w)
            outs.append(torch.bmm(self.dropout(w), values))
        context = torch.cat(outs, dim=-1)
        return self.W_o(context), torch.stack(all_w, dim=1)
