"""Causal self-attention decoding-style: the new tokens' scores against the past and against each other are
computed separately and joined (the cache used as given)."""
import torch
import torch.nn as nn

from .rope import apply_rope


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        self.n_head = num_heads
        self.n_kv = num_heads if num_kv_heads is None else int(num_kv_heads)
        if self.n_kv <= 0:
            raise ValueError("num_kv_heads must be >= 1")
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        if num_heads % self.n_kv:
            raise ValueError("num_heads must be divisible by num_kv_heads")
        self.hd = embed_dim // num_heads
        if self.hd % 2:
            raise ValueError("RoPE needs an even head dim")
        self.base = rope_base
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, self.n_kv * self.hd, bias=False)
        self.W_v = nn.Linear(embed_dim, self.n_kv * self.hd, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        B, T, C = x.shape
        P = 0 if cache is None else cache[0].shape[2]
        pos = torch.arange(T, device=x.device) + P
        q = apply_rope(self.W_q(x).reshape(B, T, self.n_head, self.hd).permute(0, 2, 1, 3), pos, base=self.base)
        k_new = apply_rope(self.W_k(x).reshape(B, T, self.n_kv, self.hd).permute(0, 2, 1, 3), pos, base=self.base)
        v_new = self.W_v(x).reshape(B, T, self.n_kv, self.hd).permute(0, 2, 1, 3)
        rep = self.n_head // self.n_kv
        kn, vn = k_new.repeat_interleave(rep, 1), v_new.repeat_interleave(rep, 1)
        scale = 1.0 / self.hd ** 0.5
        s_new = (q @ kn.transpose(-1, -2)) * scale
        s_new = s_new.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), 1), float("-inf"))
        if cache is None:
            w = torch.softmax(s_new, -1)
            y = w @ vn
            k_all, v_all = k_new, v_new
        else:
            kp, vp = cache[0].repeat_interleave(rep, 1), cache[1].repeat_interleave(rep, 1)
            w = torch.softmax(torch.cat([(q @ kp.transpose(-1, -2)) * scale, s_new], -1), -1)
            y = w[..., :P] @ vp + w[..., P:] @ vn
            k_all, v_all = torch.cat([cache[0], k_new], 2), torch.cat([cache[1], v_new], 2)
        return self.W_o(y.transpose(1, 2).reshape(B, T, C)), (k_all, v_all)
