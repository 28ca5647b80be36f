"""BUG: none
STYLE: TensorFlow NMT tutorial BahdanauAttention (W1, W2, V; expand_dims on the time axis, score = V(tanh(W1(query_with_time_axis) + W2(values)))) ported to torch and to Tq queries; masking by torch.where with a safe row maximum.
"""
import torch
from torch import nn


def _masked_softmax(score, valid_lens):
    B, Tq, Tk = score.shape
    if valid_lens is None:
        return torch.softmax(score, dim=-1)
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens.unsqueeze(1).expand(B, Tq)
    keep = torch.arange(Tk, device=score.device).view(1, 1, Tk) < lens.unsqueeze(-1)
    low = torch.finfo(score.dtype).min
    masked = torch.where(keep, score, torch.full_like(score, low))
    weights = torch.softmax(masked, dim=-1)
    return torch.where(keep, weights, torch.zeros_like(weights))


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)   # W1
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)     # W2
        self.w_v = nn.Linear(attn_dim, 1, bias=False)           # V
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        # query_with_time_axis = tf.expand_dims(query, 1), here one axis per key
        query_with_time_axis = self.W_q(queries).unsqueeze(2)       # (B, Tq, 1, h)
        processed_keys = self.W_k(keys).unsqueeze(1)                # (B, 1, Tk, h)
        score = self.w_v(torch.tanh(query_with_time_axis + processed_keys)).squeeze(-1)
        attention_weights = _masked_softmax(score, valid_lens)
        context_vector = torch.matmul(self.dropout(attention_weights), values)
        return context_vector, attention_weights
