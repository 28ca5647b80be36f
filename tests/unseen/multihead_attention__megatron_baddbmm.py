"""BUG: none
STYLE: Megatron-LM style: one fused QKV GEMM (weights of W_q, W_k, W_v concatenated) on the self-attention path, views into [b, s, 3, np, hn], scores with torch.baddbmm(alpha=1/sqrt(d)) into an additive float mask bias, [b*np, sq, sk] layout.
"""
import math
import torch
from torch import nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.attention_dropout = nn.Dropout(dropout)
        self.norm_factor = math.sqrt(self.head_dim)

    def _split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.num_heads, self.head_dim).permute(0, 2, 1, 3).reshape(
            b * self.num_heads, s, self.head_dim)

    def forward(self, queries, keys, values, mask=None):
        b, sq, E = queries.shape
        sk = keys.shape[1]
        np_, hn = self.num_heads, self.head_dim
        if queries is keys and keys is values:
            w = torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight], dim=0)
            bias = torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias], dim=0)
            mixed = F.linear(queries, w, bias).view(b, sq, 3, np_, hn)
            q, k, v = mixed.unbind(dim=2)                       # [b, s, np, hn] each
            q = q.permute(0, 2, 1, 3).reshape(b * np_, sq, hn)
            k = k.permute(0, 2, 1, 3).reshape(b * np_, sk, hn)
            v = v.permute(0, 2, 1, 3).reshape(b * np_, sk, hn)
        else:
            q = self._split(self.W_q(queries))
            k = self._split(self.W_k(keys))
            v = self._split(self.W_v(values))

        if mask is None:
            bias_add = torch.zeros(b * np_, sq, sk, dtype=q.dtype, device=q.device)
            allowed = None
        else:
            allowed = torch.broadcast_to(mask, (b, np_, sq, sk)).reshape(b * np_, sq, sk)
            bias_add = torch.zeros(b * np_, sq, sk, dtype=q.dtype, device=q.device).masked_fill(
                ~allowed, torch.finfo(q.dtype).min)
        scores = torch.baddbmm(bias_add, q, k.transpose(1, 2), beta=1.0, alpha=1.0 / self.norm_factor)
        probs = torch.softmax(scores, dim=-1)
        if allowed is not None:
            probs = probs * allowed.any(dim=-1, keepdim=True).to(probs.dtype)
        ctx = torch.bmm(self.attention_dropout(probs), v)               # [b*np, sq, hn]
        ctx = ctx.view(b, np_, sq, hn).permute(0, 2, 1, 3).reshape(b, sq, E)
        return self.W_o(ctx), probs.view(b, np_, sq, sk)
