"""BUG: nanoGPT's persistent `bias` mask buffer in the state_dict
STYLE: nanoGPT
"""
"""nanoGPT's CausalSelfAttention, grown to RoPE + GQA + a KV cache."""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F


def apply_rope(x, pos, base):
    d = x.size(-1)
    dt = torch.float64 if x.dtype == torch.float64 else torch.float32
    inv = base ** (-torch.arange(0, d, 2, device=x.device, dtype=dt) / d)
    ang = pos.to(dt).outer(inv)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class CausalSelfAttention(nn.Module):

    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0, block_size=256):
        super().__init__()
        n_kv = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads != 0 or n_kv < 1 or num_heads % n_kv != 0 or (embed_dim // num_heads) % 2:
            raise ValueError("bad head configuration")
        self.n_head, self.n_kv, self.n_embd = num_heads, n_kv, embed_dim
        hs = embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, n_kv * hs, bias=False)
        self.W_v = nn.Linear(embed_dim, n_kv * hs, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)
        self.rope_base = rope_base
        # causal mask to ensure that attention is only applied to the left in the input sequence
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size, dtype=torch.bool))
                             .view(1, 1, block_size, block_size))

    def forward(self, x, cache=None):
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)
        hs = C // self.n_head
        P = 0 if cache is None else cache[0].size(2)
        if P + T > self.bias.size(-1):
            n = 2 * (P + T)
            self.bias = torch.tril(torch.ones(n, n, dtype=torch.bool, device=x.device)).view(1, 1, n, n)
        pos = torch.arange(P, P + T, device=x.device)
        q = apply_rope(self.W_q(x).view(B, T, self.n_head, hs).transpose(1, 2), pos, self.rope_base)
        k = apply_rope(self.W_k(x).view(B, T, self.n_kv, hs).transpose(1, 2), pos, self.rope_base)
        v = self.W_v(x).view(B, T, self.n_kv, hs).transpose(1, 2)
        if cache is not None:
            k = torch.cat((cache[0], k), dim=2)
            v = torch.cat((cache[1], v), dim=2)
        rep = self.n_head // self.n_kv
        kk = k.repeat_interleave(rep, dim=1)
        vv = v.repeat_interleave(rep, dim=1)
        # manual implementation of attention
        att = (q @ kk.transpose(-2, -1)) * (1.0 / math.sqrt(kk.size(-1)))
        att = att.masked_fill(self.bias[:, :, P:P + T, :P + T].to(x.device) == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        y = att @ vv  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side
        return self.W_o(y), (k, v)
