"""BUG: dropout is applied to the weights before they are stored/returned, so in train() mode with dropout > 0 the returned weights are the dropped-and-rescaled ones (rows no longer sum to 1). Differs on: train() mode with dropout > 0 (eval() mode and dropout 0 are right).
STAGE: returned weights (after masked softmax, the dropout is applied one step too early)
STYLE: Keras-ish "weights = dropout(softmax(scores)); return weights @ v, weights" port
"""
import torch
from torch import nn


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        q = self.W_q(queries)[:, :, None, :]
        k = self.W_k(keys)[:, None, :, :]
        scores = self.w_v(torch.tanh(q + k))[..., 0]
        Tk = scores.shape[-1]
        if valid_lens is not None:
            lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
            keep = torch.arange(Tk, device=scores.device) < lens[..., None]
            scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
            weights = torch.softmax(scores, dim=-1) * keep
        else:
            weights = torch.softmax(scores, dim=-1)
        weights = self.dropout(weights)
        return torch.bmm(weights, values), weights
