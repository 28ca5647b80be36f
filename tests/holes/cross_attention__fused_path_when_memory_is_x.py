"""Reference: encoder-decoder cross-attention, the memory projected once into a cache of keys and values."""
import torch
from torch import nn


class CrossAttention(nn.Module):
    """Queries from x, keys and values from the memory (or the cache); per head softmax(q k^T / sqrt(d)); W_o."""

    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        memory_dim = embed_dim if memory_dim is None else memory_dim
        self.H, self.d = num_heads, embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(memory_dim, embed_dim)
        self.W_v = nn.Linear(memory_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory=None, memory_mask=None, cache=None):
        """x (B, Tq, E), memory (B, S, E_mem), memory_mask None or (B, S), cache None or (k, v) each (B, H, S, d)."""
        B, Tq, E = x.shape
        H, d = self.H, self.d
        heads = lambda t: t.view(t.shape[0], t.shape[1], H, d).transpose(1, 2)  # noqa: E731 - (B, T, E) -> (B, H, T, d)
        if cache is None and memory is x:  # self-attention through this module: one fused projection, as
            # nn.MultiheadAttention does when query is key (E_mem = E here, so the three weights stack)
            w = torch.cat((self.W_q.weight, self.W_k.weight, self.W_v.weight))
            b = torch.cat((self.W_q.bias, self.W_k.bias, self.W_v.bias))
            qkv = nn.functional.linear(x, w, b).view(B, Tq, H, 3 * d).transpose(1, 2)  # (B, H, T, 3d)
            q, k, v = qkv.chunk(3, dim=-1)
            cache = (k, v)
        else:
            if cache is None:
                if memory is None:
                    raise ValueError("CrossAttention needs memory or a cache")
                cache = (heads(self.W_k(memory)), heads(self.W_v(memory)))  # projected once: (B, H, S, d)
            q = heads(self.W_q(x))  # (B, H, Tq, d)
        k, v = cache
        scores = q @ k.transpose(-2, -1) / d**0.5  # (B, H, Tq, S)
        if memory_mask is None:
            weights = torch.softmax(scores, dim=-1)
        else:
            mask = memory_mask[:, None, None, :]  # (B, 1, 1, S): every head and query of the row
            filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            weights = torch.softmax(filled, dim=-1) * mask  # a row with no allowed position: all zeros
        context = self.dropout(weights) @ v  # (B, H, Tq, d)
        return self.W_o(context.transpose(1, 2).reshape(B, Tq, E)), weights, cache
