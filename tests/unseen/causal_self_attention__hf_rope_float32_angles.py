"""BUG: as in Hugging Face's rotary embedding, inv_freq and position * inv_freq are always computed in float32 and cos/sin cast afterwards, so float64 calls get float32-accurate angles.
STAGE: the rotary angles
"""
import torch
from torch import nn


def _rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class _RotaryEmbedding(nn.Module):
    def __init__(self, dim, base):
        super().__init__()
        self.dim = dim
        self.base = base

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq = 1.0 / (
            self.base ** (torch.arange(0, self.dim, 2, dtype=torch.int64).to(device=x.device, dtype=torch.float) / self.dim)
        )
        inv_freq_expanded = inv_freq[:, None].float()
        position_ids_expanded = position_ids[None, :].float()
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(0, 1)
        emb = torch.cat((freqs, freqs), dim=-1)
        out_dtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
        return emb.cos().to(out_dtype), emb.sin().to(out_dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim must be divisible by num_heads")
        if num_kv_heads < 1:
            raise ValueError("num_kv_heads must be >= 1")
        if num_heads % num_kv_heads != 0:
            raise ValueError("num_heads must be divisible by num_kv_heads")
        self.head_dim = embed_dim // num_heads
        if self.head_dim % 2 != 0:
            raise ValueError("head_dim must be even")
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)
        self.rotary_emb = _RotaryEmbedding(self.head_dim, float(rope_base))

    def forward(self, x, cache=None):
        B, T, E = x.shape
        H, Hkv, d = self.num_heads, self.num_kv_heads, self.head_dim
        q = self.W_q(x).view(B, T, H, d).transpose(1, 2)
        k = self.W_k(x).view(B, T, Hkv, d).transpose(1, 2)
        v = self.W_v(x).view(B, T, Hkv, d).transpose(1, 2)
        past = 0 if cache is None else cache[0].shape[2]
        position_ids = torch.arange(past, past + T, device=x.device)
        cos, sin = self.rotary_emb(x, position_ids)
        qf, kf = q.to(cos.dtype), k.to(cos.dtype)
        q = (qf * cos + _rotate_half(qf) * sin).to(x.dtype)
        k = (kf * cos + _rotate_half(kf) * sin).to(x.dtype)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        S = k.shape[2]
        G = H // Hkv
        work = cos.dtype
        qg = q.reshape(B, Hkv, G * T, d).to(work)
        scores = qg @ k.to(work).transpose(-1, -2) * (d ** -0.5)
        scores = scores.view(B, Hkv, G, T, S)
        causal = torch.arange(S, device=x.device)[None, :] <= position_ids[:, None]
        scores = scores.masked_fill(~causal, float("-inf"))
        probs = scores.softmax(dim=-1).view(B, Hkv, G * T, S)
        ctx = (probs @ v.to(work)).view(B, H, T, d).to(x.dtype)
        return self.W_o(ctx.transpose(1, 2).reshape(B, T, E)), (k, v)
