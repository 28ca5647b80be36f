"""BUG: none
STYLE: a loop over heads (2D/3D matmuls per head), RoPE frequencies in a float64 non-persistent buffer (HF's inv_freq, persistent=False), hand-written stable softmax with a causal mask built from the positions. Both absorb modes loop over heads.
"""
import math
import torch
from torch import nn


class LatentAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v, rope_base=10000.0):
        super().__init__()
        if num_heads < 1 or kv_rank < 1 or head_dim_nope < 1 or head_dim_rope < 1 or head_dim_v < 1:
            raise ValueError("num_heads, kv_rank and head dims must be >= 1")
        if head_dim_rope % 2 == 1:
            raise ValueError("head_dim_rope must be even")
        self.H, self.r, self.dn, self.dr, self.dv = num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v
        self.W_q = nn.Linear(embed_dim, num_heads * (head_dim_nope + head_dim_rope), bias=False)
        self.W_dkv = nn.Linear(embed_dim, kv_rank + head_dim_rope, bias=False)
        self.W_ukv = nn.Linear(kv_rank, num_heads * (head_dim_nope + head_dim_v), bias=False)
        self.W_o = nn.Linear(num_heads * head_dim_v, embed_dim, bias=False)
        inv_freq = 1.0 / (rope_base ** (torch.arange(0, head_dim_rope, 2, dtype=torch.float64) / head_dim_rope))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def _rope(self, x, pos):
        # x (..., T, dr); angles in x's dtype (float32 for half types)
        cdt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
        ang = (pos.to(torch.float64)[:, None] * self.inv_freq.to(device=x.device, dtype=torch.float64)[None, :]).to(cdt)
        c, s = torch.cos(ang), torch.sin(ang)
        h = self.dr // 2
        a, b = x[..., :h].to(cdt), x[..., h:].to(cdt)
        return torch.cat((a * c - b * s, a * s + b * c), -1).to(x.dtype)

    @staticmethod
    def _softmax(scores, allowed):
        scores = scores.masked_fill(~allowed, -math.inf)
        m = scores.amax(-1, keepdim=True)
        e = torch.exp(scores - m)
        return e / e.sum(-1, keepdim=True)

    def forward(self, x, cache=None, absorb=False):
        B, T, _ = x.shape
        H, r, dn, dr, dv = self.H, self.r, self.dn, self.dr, self.dv
        P = 0 if cache is None else cache[0].shape[1]
        pos = torch.arange(T, device=x.device) + P

        q_all = self.W_q(x)  # (B, T, H*(dn+dr))
        lat = self.W_dkv(x)
        c_new = lat[..., :r]
        kr_new = self._rope(lat[..., r:], pos)
        c_kv = c_new if cache is None else torch.cat((cache[0], c_new), 1)
        k_rope = kr_new if cache is None else torch.cat((cache[1], kr_new), 1)
        S = c_kv.shape[1]
        allowed = torch.arange(S, device=x.device)[None, :] <= pos[:, None]
        scale = 1.0 / math.sqrt(dn + dr)
        Wu = self.W_ukv.weight  # (H*(dn+dv), r)

        heads = []
        for n in range(H):
            qn = q_all[..., n * (dn + dr): n * (dn + dr) + dn]  # (B, T, dn)
            qr = self._rope(q_all[..., n * (dn + dr) + dn: (n + 1) * (dn + dr)], pos)  # (B, T, dr)
            W_uk = Wu[n * (dn + dv): n * (dn + dv) + dn]  # (dn, r)
            W_uv = Wu[n * (dn + dv) + dn: (n + 1) * (dn + dv)]  # (dv, r)
            rope_scores = qr @ k_rope.transpose(1, 2)  # (B, T, S)
            if absorb:
                q_lat = qn @ W_uk  # (B, T, r)
                s = (q_lat @ c_kv.transpose(1, 2) + rope_scores) * scale
                w = self._softmax(s, allowed)
                heads.append((w @ c_kv) @ W_uv.t())  # (B, T, dv)
            else:
                k_nope = c_kv @ W_uk.t()  # (B, S, dn)
                v = c_kv @ W_uv.t()  # (B, S, dv)
                s = (qn @ k_nope.transpose(1, 2) + rope_scores) * scale
                w = self._softmax(s, allowed)
                heads.append(w @ v)
        return self.W_o(torch.cat(heads, dim=-1)), (c_kv, k_rope)
