"""STYLE: serving-style decoder layer (vLLM-like: project, rotate, write to cache, attend over the cache)
BUG: the new keys/values are concatenated in front of the cached ones (cat(new, past)) instead of after them.
STAGE: cache
WHEN: a cache is given (P > 0): the returned cache is always wrong, the output too when T > 1
"""
import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads:
            raise ValueError(f"hidden size {embed_dim} not divisible by {num_heads} heads")
        if num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(f"{num_heads} heads cannot share {num_kv_heads} kv heads")
        head_size = embed_dim // num_heads
        if head_size % 2:
            raise ValueError(f"rotary embedding needs an even head size, got {head_size}")
        self.num_heads, self.num_kv_heads, self.head_size = num_heads, num_kv_heads, head_size
        self.rope_base = rope_base
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, num_kv_heads * head_size, bias=False)
        self.W_v = nn.Linear(embed_dim, num_kv_heads * head_size, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def _rotary(self, x, positions):
        half = self.head_size // 2
        dtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
        inv_freq = self.rope_base ** (-torch.arange(half, device=x.device, dtype=dtype) * 2 / self.head_size)
        freqs = torch.outer(positions.to(dtype), inv_freq)
        cos, sin = freqs.cos(), freqs.sin()
        x1, x2 = x[..., :half].to(dtype), x[..., half:].to(dtype)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)

    def forward(self, x, cache=None):
        num_tokens = x.shape[1]
        bsz = x.shape[0]
        past_len = 0 if cache is None else cache[0].shape[2]
        positions = torch.arange(past_len, past_len + num_tokens, device=x.device)

        q = self.W_q(x).view(bsz, num_tokens, self.num_heads, self.head_size).transpose(1, 2)
        k = self.W_k(x).view(bsz, num_tokens, self.num_kv_heads, self.head_size).transpose(1, 2)
        v = self.W_v(x).view(bsz, num_tokens, self.num_kv_heads, self.head_size).transpose(1, 2)
        q = self._rotary(q, positions)
        k = self._rotary(k, positions)

        if cache is not None:
            k = torch.cat((k, cache[0]), dim=2)
            v = torch.cat((v, cache[1]), dim=2)
        seq_len = k.shape[2]

        group = self.num_heads // self.num_kv_heads
        qg = q.reshape(bsz, self.num_kv_heads, group, num_tokens, self.head_size)
        scores = torch.einsum("bhgtd,bhsd->bhgts", qg, k) / self.head_size ** 0.5
        allowed = torch.ones(num_tokens, seq_len, dtype=torch.bool, device=x.device).tril(past_len)
        scores = scores.masked_fill(~allowed, float("-inf"))
        probs = scores.softmax(dim=-1)
        out = torch.einsum("bhgts,bhsd->bhgtd", probs, v).reshape(bsz, self.num_heads, num_tokens, self.head_size)
        out = out.transpose(1, 2).reshape(bsz, num_tokens, -1)
        return self.W_o(out), (k, v)
