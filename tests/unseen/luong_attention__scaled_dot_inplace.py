"""BUG: scaled_dot divides the caller's queries in place (queries.div_(sqrt(key_dim))) to save memory: the returned values are right on that call, but the input is modified (and a leaf that requires grad raises). Differs on any scaled_dot input (side effect; a second call on the same tensor is then scaled twice).
STAGE: the inputs (side effect), then the scores of any later call
STYLE: memory-saving "in-place where possible" port (Megatron-ish q.div_ habits)
"""
import math
import torch
from torch import nn


class LuongAttention(nn.Module):
    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        if score not in ("dot", "scaled_dot", "general", "concat"):
            raise ValueError("score must be one of: dot, scaled_dot, general, concat")
        if score in ("dot", "scaled_dot") and query_dim != key_dim:
            raise ValueError("query_dim != key_dim")
        if score == "concat" and attn_dim is None:
            raise ValueError("attn_dim is required for concat")
        self.score = score
        self.key_dim = key_dim
        if score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if score == "concat":
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    @staticmethod
    def _masked_softmax(x, valid_lens):
        if valid_lens is None:
            return x.softmax(-1)
        B, Tq, Tk = x.shape
        vl = valid_lens.repeat_interleave(Tq) if valid_lens.dim() == 1 else valid_lens.reshape(-1)
        keep = torch.arange(Tk, device=x.device)[None, :] < vl[:, None]
        keep = keep.view(B, Tq, Tk)
        live = keep.any(-1, keepdim=True)
        x = x.masked_fill(~keep, float('-inf')).masked_fill(~live, 0.0)
        return x.softmax(-1).masked_fill(~live, 0.0)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        if self.score == "concat":
            k = keys.unsqueeze(1).expand(B, Tq, Tk, keys.shape[-1])
            q = queries.unsqueeze(2).expand(B, Tq, Tk, queries.shape[-1])
            scores = self.v_a(torch.tanh(self.W_a(torch.cat([q, k], dim=-1)))).squeeze(-1)
        elif self.score == "general":
            scores = queries @ self.W_a(keys).transpose(1, 2)
        else:
            if self.score == "scaled_dot":
                queries = queries.div_(math.sqrt(self.key_dim))
            scores = queries @ keys.transpose(1, 2)
        w = self._masked_softmax(scores, valid_lens)
        return self.dropout(w) @ values, w
