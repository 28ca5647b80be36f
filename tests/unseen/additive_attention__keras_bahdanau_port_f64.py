"""BUG: none
STYLE: a port of the TensorFlow tutorial's W1/W2/V layer, F.dropout on the weights, float64 inside
"""
"""A port of the TensorFlow NMT tutorial's BahdanauAttention layer (W1, W2, V Dense layers;
score of shape (batch, keys, 1); softmax over the key axis; context = reduce_sum(weights *
values)), extended to many queries and a sequence mask. Computed in float64, cast back.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def sequence_mask(lengths, maxlen):
    """tf.sequence_mask: lengths (...,) -> (..., maxlen) booleans."""
    return torch.arange(maxlen, device=lengths.device) < lengths.unsqueeze(-1)


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)   # W1
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)     # W2
        self.w_v = nn.Linear(attn_dim, 1, bias=False)           # V
        self.p = dropout

    def forward(self, queries, keys, values, valid_lens=None):
        f64 = torch.float64
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        q = F.linear(queries.to(f64), self.W_q.weight.to(f64)).unsqueeze(2)   # (B, Tq, 1, h)
        k = F.linear(keys.to(f64), self.W_k.weight.to(f64)).unsqueeze(1)      # (B, 1, Tk, h)
        score = F.linear(torch.tanh(q + k), self.w_v.weight.to(f64))          # (B, Tq, Tk, 1)
        if valid_lens is None:
            mask = torch.ones(B, Tq, Tk, 1, dtype=torch.bool, device=queries.device)
        else:
            lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(B, Tq)
            mask = sequence_mask(lens, Tk).unsqueeze(-1)
        big_neg = torch.finfo(f64).min
        score = torch.where(mask, score, torch.full_like(score, big_neg))
        score = score - score.max(dim=2, keepdim=True).values
        e = torch.exp(score) * mask
        total = e.sum(dim=2, keepdim=True)
        attention_weights = e / torch.clamp(total, min=torch.finfo(f64).tiny)
        dropped = F.dropout(attention_weights, p=self.p, training=self.training)
        context_vector = torch.sum(dropped * values.to(f64).unsqueeze(1), dim=2)   # (B, Tq, dv)
        dt = queries.dtype
        return context_vector.to(dt), attention_weights.squeeze(-1).to(dt)
