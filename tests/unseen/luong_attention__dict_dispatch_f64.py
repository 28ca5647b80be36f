"""BUG: masked scores set to 0 before subtracting the valid maximum: where every valid score is near -1e4 a masked one becomes about +1e4, exp overflows to inf and inf * 0 is NaN
STYLE: score functions in a dict bound with functools.partial, a float64 softmax by hand
"""
import math
from functools import partial

import torch
from torch import nn

_CHOICES = ("dot", "scaled_dot", "general", "concat")


def _dot(module, q, k):
    return q @ k.transpose(-1, -2)


def _scaled_dot(module, q, k):
    return q @ k.transpose(-1, -2) / math.sqrt(k.shape[-1])


def _general(module, q, k):
    return q @ module.W_a(k).transpose(-1, -2)


def _concat(module, q, k):
    Tq, Tk = q.shape[1], k.shape[1]
    qq = q.unsqueeze(2).expand(-1, -1, Tk, -1)
    kk = k.unsqueeze(1).expand(-1, Tq, -1, -1)
    return module.v_a(torch.tanh(module.W_a(torch.cat([qq, kk], dim=-1)))).squeeze(-1)


class LuongAttention(nn.Module):
    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        if score not in _CHOICES:
            raise ValueError(f"score must be one of {_CHOICES}, not {score!r}")
        if score in ("dot", "scaled_dot") and query_dim != key_dim:
            raise ValueError("dot scores need query_dim == key_dim")
        if score == "concat" and attn_dim is None:
            raise ValueError("score='concat' requires attn_dim")
        if score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if score == "concat":
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self._score = partial(globals()["_" + score], self)
        self.drop = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        scores = self._score(queries, keys).double()         # softmax in float64
        B, Tq, Tk = scores.shape
        if valid_lens is None:
            weights = torch.softmax(scores, dim=-1)
        else:
            lens = valid_lens.reshape(B, -1, 1)                # (B, 1, 1) or (B, Tq, 1)
            keep = torch.arange(Tk, device=scores.device).view(1, 1, Tk) < lens
            s = torch.where(keep, scores, torch.zeros((), dtype=scores.dtype, device=scores.device))
            s = s - s.masked_fill(~keep, -math.inf).amax(-1, keepdim=True).nan_to_num(0.0, neginf=0.0).detach()
            e = s.exp() * keep
            den = e.sum(-1, keepdim=True)
            weights = e / torch.where(den > 0, den, torch.ones_like(den))
        weights = weights.to(queries.dtype)
        return torch.bmm(self.drop(weights), values), weights
