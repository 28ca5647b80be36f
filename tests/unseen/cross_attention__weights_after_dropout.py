"""STYLE: fairseq multihead_attention.py layout: heads folded into the batch dim (B*H, T, d), torch.bmm, additive finfo.min padding mask
BUG: the returned attention weights are the dropped-out probabilities (after dropout) rather than the weights before dropout
STAGE: the returned weights in train() mode with dropout > 0 (output and cache are right)
"""
import torch
from torch import nn
import torch.nn.functional as F


class CrossAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = embed_dim if memory_dim is None else memory_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.scaling = self.head_dim ** -0.5
        self.dropout_p = dropout
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(self.kdim, embed_dim)
        self.W_v = nn.Linear(self.kdim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)

    def _heads(self, t):
        # (B, T, E) -> (B, H, T, d)
        B, T, _ = t.shape
        return t.reshape(B, T, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x, memory=None, memory_mask=None, cache=None):
        bsz, tgt_len, embed_dim = x.shape
        H, d = self.num_heads, self.head_dim

        if cache is not None:
            k, v = cache                                    # static_kv: never recomputed
        elif memory is not None:
            k = self._heads(self.W_k(memory))
            v = self._heads(self.W_v(memory))
        else:
            raise ValueError("need memory or cache")
        new_cache = (k, v)
        src_len = k.size(2)

        q = self._heads(self.W_q(x) * self.scaling).reshape(bsz * H, tgt_len, d)
        kb = k.reshape(bsz * H, src_len, d)
        vb = v.reshape(bsz * H, src_len, d)

        attn_weights = torch.bmm(q, kb.transpose(1, 2))      # (B*H, Tq, S)
        if memory_mask is not None:
            pad = torch.zeros(bsz, 1, 1, src_len, dtype=attn_weights.dtype, device=attn_weights.device)
            pad = pad.masked_fill(~memory_mask.view(bsz, 1, 1, src_len), torch.finfo(attn_weights.dtype).min)
            attn_weights = (attn_weights.view(bsz, H, tgt_len, src_len) + pad).view(bsz * H, tgt_len, src_len)
        attn_weights_float = F.softmax(attn_weights, dim=-1)
        if memory_mask is not None:
            # a fully padded source row comes out uniform: zero it
            has_key = memory_mask.any(dim=-1).to(attn_weights_float.dtype)    # (B,)
            attn_weights_float = (attn_weights_float.view(bsz, H, tgt_len, src_len)
                                  * has_key.view(bsz, 1, 1, 1)).view(bsz * H, tgt_len, src_len)

        attn_probs = F.dropout(attn_weights_float, p=self.dropout_p, training=self.training)
        attn = torch.bmm(attn_probs, vb)                      # (B*H, Tq, d)
        attn = attn.view(bsz, H, tgt_len, d).transpose(1, 2).reshape(bsz, tgt_len, embed_dim)
        attn = self.W_o(attn)
        return attn, attn_probs.view(bsz, H, tgt_len, src_len), new_cache
