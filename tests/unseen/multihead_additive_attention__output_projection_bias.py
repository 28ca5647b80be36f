"""BUG: W_o is nn.Linear(num_heads * value_dim, value_dim) with the default bias, so an extra W_o.bias parameter is added to the output.
STAGE: the output projection
"""
import torch
from torch import nn
import torch.nn.functional as F

from .masked_softmax import masked_softmax


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.num_heads = num_heads
        self.attn_dim = attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.zeros(num_heads, attn_dim))
        self.W_o = nn.Linear(num_heads * value_dim, value_dim)
        self.dropout = nn.Dropout(dropout)
        nn.init.xavier_uniform_(self.w_v)

    def forward(self, queries, keys, values, valid_lens=None):
        head_outputs, head_weights = [], []
        for n in range(self.num_heads):
            rows = slice(n * self.attn_dim, (n + 1) * self.attn_dim)
            q_n = F.linear(queries, self.W_q.weight[rows])            # (B, Tq, h)
            k_n = F.linear(keys, self.W_k.weight[rows])               # (B, Tk, h)
            scores_n = torch.tanh(q_n.unsqueeze(2) + k_n.unsqueeze(1)) @ self.w_v[n]   # (B, Tq, Tk)
            weights_n = masked_softmax(scores_n, valid_lens)
            head_weights.append(weights_n)
            head_outputs.append(torch.bmm(self.dropout(weights_n), values))   # (B, Tq, dv)
        context = torch.cat(head_outputs, dim=-1)                       # (B, Tq, H * dv), head 0 first
        return self.W_o(context), torch.stack(head_weights, dim=1)
