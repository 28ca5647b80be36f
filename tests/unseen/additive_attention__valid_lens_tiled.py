"""BUG: a (B,) valid_lens is expanded with valid_lens.repeat(Tq) (tiles b0,b1,..,b0,b1,..) instead of repeat_interleave, so after the flatten to (B*Tq, Tk) row (b, i) uses the length of batch (b*Tq + i) % B. Differs on: valid_lens of shape (B,) with B > 1, Tq > 1 and unequal lengths. (B,Tq) lens are fine.
STAGE: the flattened per-row valid lengths -> mask -> weights
STYLE: d2l.ai AdditiveAttention + masked_softmax, with the classic repeat/repeat_interleave mix-up
"""
import torch
from torch import nn


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = valid_lens.repeat(shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = X.reshape(-1, shape[-1])
    mask = torch.arange(shape[-1], device=X.device)[None, :] < valid_lens[:, None]
    X = X.masked_fill(~mask, torch.finfo(X.dtype).min)
    return (nn.functional.softmax(X, dim=-1) * mask).reshape(shape)


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        queries, keys = self.W_q(queries), self.W_k(keys)
        features = torch.tanh(queries.unsqueeze(2) + keys.unsqueeze(1))
        scores = self.w_v(features).squeeze(-1)
        weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(weights), values), weights
