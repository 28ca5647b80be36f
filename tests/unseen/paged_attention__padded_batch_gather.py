"""BUG: values right, but the whole batch is gathered at once to the longest table (B * max_blocks * block_size * Hq * d), which the contract's memory bound forbids (vectorised variant of c1_per_seq_gather: same masking, no per-sequence loop).
STAGE: memory (the whole batch gathered)
"""
import math
import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    num_blocks, block_size, Hkv, _ = k_cache.shape
    dv = v_cache.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError(f"Hq={Hq} is not a multiple of Hkv={Hkv}")
    G = Hq // Hkv
    max_blocks = block_tables.shape[1]
    scale = 1.0 / math.sqrt(d)
    bt = block_tables.long()
    k = k_cache[bt].reshape(B, max_blocks * block_size, Hkv, d)
    v = v_cache[bt].reshape(B, max_blocks * block_size, Hkv, dv)
    valid = torch.arange(max_blocks * block_size, device=queries.device)[None, :] < context_lens.long()[:, None]
    k = torch.where(valid[:, :, None, None], k, torch.zeros((), dtype=k.dtype, device=k.device))
    v = torch.where(valid[:, :, None, None], v, torch.zeros((), dtype=v.dtype, device=v.device))
    if G > 1:
        k = torch.repeat_interleave(k, G, dim=2)
        v = torch.repeat_interleave(v, G, dim=2)
    scores = torch.einsum("bhd,bthd->bht", queries, k) * scale
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    any_valid = valid.any(-1)[:, None, None]
    scores = scores.masked_fill(~any_valid, 0.0)
    w = torch.softmax(scores, dim=-1).masked_fill(~valid[:, None, :], 0.0)
    return torch.einsum("bht,bthd->bhd", w, v)
