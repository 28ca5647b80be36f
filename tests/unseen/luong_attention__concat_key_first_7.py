"""BUG: concat scores on [k; q] instead of [q; k]
STYLE: einsum
"""
import torch
from torch import nn


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    B, Tq, Tk = X.shape
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None].expand(B, Tq)
    keep = torch.arange(Tk, device=X.device)[None, None, :] < valid_lens[..., None]
    X = torch.where(keep, X, torch.tensor(-1e30 if X.dtype != torch.float16 else -6e4,
                                         dtype=X.dtype, device=X.device))
    return nn.functional.softmax(X, dim=-1) * keep.to(X.dtype)


class LuongAttention(nn.Module):
    """Luong et al. 2015 scores, d2l-style module layout, einsum everywhere."""

    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.mode = score
        if score == "dot" or score == "scaled_dot":
            if query_dim != key_dim:
                raise ValueError(f"'{score}' needs query_dim == key_dim")
        elif score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        elif score == "concat":
            if attn_dim is None:
                raise ValueError("'concat' needs attn_dim")
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        else:
            raise ValueError("score must be 'dot', 'scaled_dot', 'general' or 'concat'")
        self.dropout = nn.Dropout(dropout)
        self.query_dim = query_dim

    def forward(self, queries, keys, values, valid_lens=None):
        if self.mode == "dot":
            scores = torch.einsum("bqd,bkd->bqk", queries, keys)
        elif self.mode == "scaled_dot":
            scores = torch.einsum("bqd,bkd->bqk", queries, keys) / keys.shape[-1] ** 0.5
        elif self.mode == "general":
            scores = torch.einsum("bqd,bkd->bqk", queries, self.W_a(keys))
        else:
            Wk, Wq = self.W_a.weight.split([keys.shape[-1], self.query_dim], dim=1)  # [k_j ; q_i]
            feats = torch.tanh(torch.einsum("bqd,ad->bqa", queries, Wq)[:, :, None, :]
                               + torch.einsum("bkd,ad->bka", keys, Wk)[:, None, :, :])
            scores = torch.einsum("bqka,a->bqk", feats, self.v_a.weight[0])
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.einsum("bqk,bkv->bqv", self.dropout(self.attention_weights), values), self.attention_weights
