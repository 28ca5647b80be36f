"""BUG: none
STYLE: an explicit loop over query heads (head n slices features n*d:(n+1)*d, reads K/V head n // G), RoPE rotating (x1, x2) halves with explicit cos/sin, a manual max-subtracted softmax, heads concatenated.
"""
import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        if num_kv_heads is None:
            num_kv_heads = num_heads
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim % num_heads != 0")
        if num_kv_heads < 1:
            raise ValueError("num_kv_heads < 1")
        if num_heads % num_kv_heads != 0:
            raise ValueError("num_heads % num_kv_heads != 0")
        if (embed_dim // num_heads) % 2 != 0:
            raise ValueError("odd head size")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = embed_dim // num_heads
        self.rope_base = rope_base
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def _rotate(self, t, start):
        # t: (B, T, d) at positions start..start+T-1
        T, d = t.shape[1], t.shape[2]
        half = d // 2
        dt = t.dtype if t.dtype in (torch.float32, torch.float64) else torch.float32
        pos = torch.arange(start, start + T, device=t.device, dtype=dt)
        expo = torch.arange(half, device=t.device, dtype=torch.float64) * 2.0 / d
        inv = (float(self.rope_base) ** -expo).to(dt)
        ang = pos[:, None] * inv[None, :]
        cos, sin = torch.cos(ang), torch.sin(ang)
        tt = t.to(dt)
        x1, x2 = tt[..., :half], tt[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(t.dtype)

    def forward(self, x, cache=None):
        B, T, E = x.shape
        d = self.head_dim
        group = self.num_heads // self.num_kv_heads
        P = 0 if cache is None else cache[0].shape[2]
        q_all = self.W_q(x)
        k_all = self.W_k(x)
        v_all = self.W_v(x)

        keys, values = [], []
        for g in range(self.num_kv_heads):
            k_g = self._rotate(k_all[:, :, g * d:(g + 1) * d], P)
            v_g = v_all[:, :, g * d:(g + 1) * d]
            if cache is not None:
                k_g = torch.cat([cache[0][:, g], k_g], dim=1)
                v_g = torch.cat([cache[1][:, g], v_g], dim=1)
            keys.append(k_g)
            values.append(v_g)
        S = P + T
        q_pos = torch.arange(P, P + T, device=x.device)
        k_pos = torch.arange(S, device=x.device)
        future = k_pos[None, :] > q_pos[:, None]

        heads = []
        for n in range(self.num_heads):
            q_n = self._rotate(q_all[:, :, n * d:(n + 1) * d], P)
            k_n, v_n = keys[n // group], values[n // group]
            work = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
            s = torch.bmm(q_n.to(work), k_n.to(work).transpose(1, 2)) / math.sqrt(d)
            s = s.masked_fill(future, float("-inf"))
            s = s - s.amax(dim=-1, keepdim=True).detach()
            e = torch.exp(s)
            w = e / e.sum(dim=-1, keepdim=True)
            heads.append(torch.bmm(w, v_n.to(work)).to(x.dtype))
        out = self.W_o(torch.cat(heads, dim=-1))
        return out, (torch.stack(keys, dim=1), torch.stack(values, dim=1))
