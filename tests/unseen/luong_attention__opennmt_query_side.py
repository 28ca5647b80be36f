"""BUG: none
STYLE: OpenNMT GlobalAttention flavour: "general" transforms the *query* side (q W_a, i.e. W_a^T applied to q) once instead of every key, and "concat" splits W_a into its query and key column blocks so the two projections are added with broadcasting (no (Tq, Tk, dq + dk) tensor is built).
"""
import torch
from torch import nn
import torch.nn.functional as F

from .masked_softmax import masked_softmax

_CHOICES = ("dot", "scaled_dot", "general", "concat")


class LuongAttention(nn.Module):
    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        if score not in _CHOICES:
            raise ValueError(f"Please select a valid attention type (got {score!r}): one of {', '.join(_CHOICES)}")
        if score in ("dot", "scaled_dot") and query_dim != key_dim:
            raise ValueError(f"score={score!r} requires query_dim == key_dim ({query_dim} != {key_dim})")
        if score == "concat" and attn_dim is None:
            raise ValueError("score='concat' requires attn_dim")
        self.attn_type = score
        self.query_dim, self.key_dim = query_dim, key_dim
        if score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        elif score == "concat":
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = dropout

    def score(self, h_t, h_s):
        """h_t: (B, Tq, dq) decoder side, h_s: (B, Tk, dk) encoder side -> (B, Tq, Tk)."""
        if self.attn_type in ("dot", "scaled_dot", "general"):
            if self.attn_type == "general":
                # q . (W k) == (W^T q) . k  with W of shape (dq, dk)
                h_t = torch.matmul(h_t, self.W_a.weight)          # (B, Tq, dk)
            align = torch.bmm(h_t, h_s.transpose(1, 2))
            if self.attn_type == "scaled_dot":
                align = align * self.key_dim ** -0.5
            return align
        w_query = self.W_a.weight[:, :self.query_dim]
        w_key = self.W_a.weight[:, self.query_dim:]
        wq = F.linear(h_t, w_query).unsqueeze(2)                  # (B, Tq, 1, h)
        uh = F.linear(h_s, w_key).unsqueeze(1)                    # (B, 1, Tk, h)
        return self.v_a(torch.tanh(wq + uh)).squeeze(-1)

    def forward(self, queries, keys, values, valid_lens=None):
        align = self.score(queries, keys)
        align_vectors = masked_softmax(align, valid_lens)
        attn = F.dropout(align_vectors, p=self.dropout, training=self.training)
        c = torch.bmm(attn, values)
        return c, align_vectors
