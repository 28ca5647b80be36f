"""Reference: the attention of a LLaMA-style decoder: RoPE, grouped-query heads and a KV cache."""
import torch
from torch import nn

from .rope import apply_rope


class CausalSelfAttention(nn.Module):
    """Causal self-attention over new tokens x, after the cached keys and values of earlier ones."""

    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim = {embed_dim} is not divisible by num_heads = {num_heads}")
        if num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(f"num_heads = {num_heads} is not a multiple of num_kv_heads = {num_kv_heads} (>= 1)")
        self.H, self.Hkv, self.d, self.rope_base = num_heads, num_kv_heads, embed_dim // num_heads, rope_base
        if self.d % 2:
            raise ValueError(f"the head size d = {self.d} must be even for RoPE")
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, num_kv_heads * self.d, bias=False)
        self.W_v = nn.Linear(embed_dim, num_kv_heads * self.d, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        """x (B, T, E), cache None or (k, v) each (B, Hkv, P, d) -> output (B, T, E), cache (k, v) each (B, Hkv, P+T, d)."""
        B, T, E = x.shape
        P = 0 if cache is None else cache[0].shape[-2]
        positions = torch.arange(P, P + T, device=x.device)  # the new tokens' positions
        q = self.W_q(x).view(B, T, self.H, self.d).transpose(1, 2)  # (B, H, T, d)
        k = self.W_k(x).view(B, T, self.Hkv, self.d).transpose(1, 2)  # (B, Hkv, T, d)
        v = self.W_v(x).view(B, T, self.Hkv, self.d).transpose(1, 2)
        q = apply_rope(q, positions, base=self.rope_base)
        k = apply_rope(k, positions, base=self.rope_base)  # cached keys are stored rotated
        if cache is not None:
            k = torch.cat((cache[0], k), dim=-2)  # (B, Hkv, P+T, d): a new tensor, the given cache untouched
            v = torch.cat((cache[1], v), dim=-2)
        G = self.H // self.Hkv
        keys = k.repeat_interleave(G, dim=1)  # query head n reads key/value head n // G
        values = v.repeat_interleave(G, dim=1)
        scores = q @ keys.transpose(-2, -1) / self.d ** 0.5  # (B, H, T, P+T)
        allowed = torch.ones(T, P + T, dtype=torch.bool, device=x.device).tril(P)  # new token t sees 0..P+t
        scores = scores.masked_fill(~allowed, float("-inf"))  # every row keeps its own key: never all masked
        context = torch.softmax(scores, dim=-1) @ values  # (B, H, T, d)
        return self.W_o(context.transpose(1, 2).reshape(B, T, E)), (k, v)
