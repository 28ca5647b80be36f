"""STYLE: Hugging Face LlamaAttention (rotary embedding module with a non-persistent inv_freq buffer, repeat_kv, eager attention with an additive causal mask)
BUG: none
STAGE: none
WHEN: never
"""
import torch
from torch import nn


def rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos = cos.unsqueeze(1)  # broadcast over heads
    sin = sin.unsqueeze(1)
    q_embed = (q.to(cos.dtype) * cos) + (rotate_half(q.to(cos.dtype)) * sin)
    k_embed = (k.to(cos.dtype) * cos) + (rotate_half(k.to(cos.dtype)) * sin)
    return q_embed.to(q.dtype), k_embed.to(k.dtype)


def repeat_kv(hidden_states, n_rep):
    """(batch, num_key_value_heads, seqlen, head_dim) -> (batch, num_attention_heads, seqlen, head_dim)"""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.dim, self.base = dim, base
        self.register_buffer("freq_index", torch.arange(0, dim, 2, dtype=torch.int64), persistent=False)

    def forward(self, x, position_ids):
        dtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
        inv_freq = 1.0 / (self.base ** (self.freq_index.to(device=x.device, dtype=dtype) / self.dim))
        freqs = position_ids[..., None].to(dtype) * inv_freq  # (batch, seq, dim/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        self.hidden_size = embed_dim
        self.num_heads = num_heads
        self.num_key_value_heads = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads != 0:
            raise ValueError(f"hidden_size ({embed_dim}) must be divisible by num_heads ({num_heads})")
        if self.num_key_value_heads < 1 or num_heads % self.num_key_value_heads != 0:
            raise ValueError(
                f"num_heads ({num_heads}) must be a multiple of num_key_value_heads ({self.num_key_value_heads})"
            )
        self.head_dim = embed_dim // num_heads
        if self.head_dim % 2 != 0:
            raise ValueError(f"head_dim ({self.head_dim}) must be even for rotary embeddings")
        self.num_key_value_groups = num_heads // self.num_key_value_heads
        self.scaling = self.head_dim ** -0.5

        self.W_q = nn.Linear(embed_dim, num_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, self.num_key_value_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, self.num_key_value_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * self.head_dim, embed_dim, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(self.head_dim, base=rope_base)

    def forward(self, x, cache=None):
        bsz, q_len, _ = x.size()
        past_len = 0 if cache is None else cache[0].shape[-2]
        position_ids = torch.arange(past_len, past_len + q_len, device=x.device).unsqueeze(0).expand(bsz, -1)

        hidden_shape = (bsz, q_len, -1, self.head_dim)
        query_states = self.W_q(x).view(hidden_shape).transpose(1, 2)
        key_states = self.W_k(x).view(hidden_shape).transpose(1, 2)
        value_states = self.W_v(x).view(hidden_shape).transpose(1, 2)

        cos, sin = self.rotary_emb(value_states, position_ids)
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)

        if cache is not None:
            key_states = torch.cat([cache[0], key_states], dim=-2)
            value_states = torch.cat([cache[1], value_states], dim=-2)
        present = (key_states, value_states)
        kv_len = key_states.shape[-2]

        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)

        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling
        causal_mask = torch.full((q_len, kv_len), torch.finfo(attn_weights.dtype).min, dtype=attn_weights.dtype, device=x.device)
        causal_mask = torch.triu(causal_mask, diagonal=past_len + 1)
        attn_weights = attn_weights + causal_mask

        softmax_dtype = torch.float32 if attn_weights.dtype in (torch.float16, torch.bfloat16) else attn_weights.dtype
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=softmax_dtype).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, -1).contiguous()
        return self.W_o(attn_output), present
