"""BUG: none
STYLE: fla's chunk form with einsum; None as one chunk of the whole sequence
"""
"""Chunkwise causal linear attention in the style of flash-linear-attention's naive chunk
reference: inter-chunk contribution from the state h, intra-chunk from a masked q k^T.

chunk_size=None runs the same code with one chunk holding the whole sequence (the parallel form).
"""
import torch


def feature_map(x):
    # elu(x) + 1 written piecewise; exp only sees x <= 0, so no inf in the unused branch.
    return torch.where(x > 0, x + 1.0, torch.exp(torch.clamp(x, max=0.0)))


def _chunk_len(chunk_size, T):
    if chunk_size is None:
        return max(T, 1)
    if type(chunk_size) is not int or chunk_size < 1:
        raise ValueError("chunk_size must be a positive int or None")
    return chunk_size


def causal_linear_attention(queries, keys, values, chunk_size=None):
    T = queries.shape[-2]
    C = _chunk_len(chunk_size, T)
    q, k = feature_map(queries), feature_map(keys)
    B, H, _, d = q.shape
    dv = values.shape[-1]
    h = q.new_zeros(B, H, d, dv)
    n = q.new_zeros(B, H, d)
    pieces = []
    for i in range(0, T, C):
        q_i, k_i, v_i = q[:, :, i:i + C], k[:, :, i:i + C], values[:, :, i:i + C]
        c = q_i.shape[2]
        causal = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
        attn = torch.einsum("bhid,bhjd->bhij", q_i, k_i).masked_fill(~causal, 0.0)
        o_i = torch.einsum("bhid,bhde->bhie", q_i, h) + torch.einsum("bhij,bhje->bhie", attn, v_i)
        z_i = torch.einsum("bhid,bhd->bhi", q_i, n) + attn.sum(-1)
        pieces.append(o_i / z_i.unsqueeze(-1))
        h = h + torch.einsum("bhjd,bhje->bhde", k_i, v_i)
        n = n + k_i.sum(2)
    return torch.cat(pieces, dim=2)


def linear_attention_step(q_t, k_t, v_t, state=None):
    fq, fk = feature_map(q_t), feature_map(k_t)
    if state is None:
        h = torch.einsum("bhd,bhe->bhde", fk, v_t)
        n = fk
    else:
        h_prev, n_prev = state
        h = h_prev + torch.einsum("bhd,bhe->bhde", fk, v_t)
        n = n_prev + fk
    o = torch.einsum("bhd,bhde->bhe", fq, h) / torch.einsum("bhd,bhd->bh", fq, n).unsqueeze(-1)
    return o, (h, n)
