"""BUG: a padded whole-batch gather: right values, past the memory bound
STYLE: whole-batch gather
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    """Gather the whole batch into padded (B, max_blocks*bs, Hkv, d) tensors, then one masked attention."""
    B, Hq, d = queries.shape
    _, bs, Hkv, dv = v_cache.shape
    if Hq % Hkv:
        raise ValueError("Hq % Hkv != 0")
    G = Hq // Hkv
    tables = block_tables.long()
    k = k_cache[tables].flatten(1, 2)                                 # (B, max_blocks*bs, Hkv, d)
    v = v_cache[tables].flatten(1, 2)
    T = k.shape[1]
    valid = torch.arange(T, device=queries.device)[None, :] < context_lens.long()[:, None]    # (B, T)
    k = k.masked_fill(~valid[:, :, None, None], 0.0)
    v = v.masked_fill(~valid[:, :, None, None], 0.0)
    s = torch.einsum("bhgd,bthd->bhgt", queries.view(B, Hkv, G, d), k) / math.sqrt(d)
    s = s.masked_fill(~valid[:, None, None, :], torch.finfo(s.dtype).min)
    p = s.softmax(-1) * valid[:, None, None, :]
    return torch.einsum("bhgt,bthv->bhgv", p, v).reshape(B, Hq, dv)
