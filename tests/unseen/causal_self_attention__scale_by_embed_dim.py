"""BUG: the attention logits are scaled by 1/sqrt(E) (C, the embedding size) instead of 1/sqrt(d), the per-head size; shapes and masking are all right.
STAGE: the scores
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _rope(x, positions, base):
    d = x.shape[-1]
    work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d))
    freqs = positions.to(work)[:, None] * inv_freq.to(work)
    emb = torch.cat((freqs, freqs), dim=-1)
    xw = x.to(work)
    return (xw * emb.cos() + _rotate_half(xw) * emb.sin()).to(x.dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        if num_kv_heads is None:
            num_kv_heads = num_heads
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim must be divisible by num_heads")
        if num_kv_heads < 1:
            raise ValueError("num_kv_heads must be >= 1")
        if num_heads % num_kv_heads != 0:
            raise ValueError("num_heads must be divisible by num_kv_heads")
        head_dim = embed_dim // num_heads
        if head_dim % 2 != 0:
            raise ValueError("head_dim must be even for RoPE")
        self.n_embd = embed_dim
        self.n_head = num_heads
        self.n_kv_head = num_kv_heads
        self.head_dim = head_dim
        self.rope_base = float(rope_base)
        kv_dim = num_kv_heads * head_dim
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, kv_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, kv_dim, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        B, T, C = x.size()
        hd = self.head_dim
        kv_dim = self.n_kv_head * hd
        w_qkv = torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight], dim=0)
        q, k, v = F.linear(x, w_qkv).split([C, kv_dim, kv_dim], dim=2)
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)
        k = k.view(B, T, self.n_kv_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_kv_head, hd).transpose(1, 2)

        past = 0 if cache is None else cache[0].size(2)
        pos = torch.arange(past, past + T, device=x.device)
        q = _rope(q, pos, self.rope_base)
        k = _rope(k, pos, self.rope_base)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        S = k.size(2)

        rep = self.n_head // self.n_kv_head
        k_rep = k.repeat_interleave(rep, dim=1)
        v_rep = v.repeat_interleave(rep, dim=1)
        att = (q @ k_rep.transpose(-2, -1)) * (1.0 / math.sqrt(C))
        causal = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(diagonal=past)
        att = att.masked_fill(~causal, float("-inf"))
        if att.dtype in (torch.float16, torch.bfloat16):
            att = F.softmax(att.float(), dim=-1).to(q.dtype)
        else:
            att = F.softmax(att, dim=-1)
        y = att @ v_rep
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.W_o(y), (k, v)
