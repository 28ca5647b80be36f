"""
BUG: none
Style: Mistral/xformers-like loop over query blocks; each block concatenates the sink prefix
with its contiguous key band, builds an explicit boolean mask, fills -inf and guards rows
that see no key with torch.where.
"""
import math

import torch


def _validate(queries, keys, values, window, num_sinks, block_size):
    for _name, _n in (("window", window), ("num_sinks", num_sinks), ("block_size", block_size)):
        if isinstance(_n, bool) or not isinstance(_n, int):
            raise ValueError(f"{_name} must be an int, got {_n!r}")
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if num_sinks < 0:
        raise ValueError(f"num_sinks must be >= 0, got {num_sinks}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if not (queries.dim() == keys.dim() == values.dim()) or not 2 <= queries.dim() <= 4:
        raise ValueError("queries, keys and values must have the same number of dims (2 to 4)")
    if queries.shape[:-2] != keys.shape[:-2] or keys.shape[:-2] != values.shape[:-2]:
        raise ValueError("leading dims of queries, keys and values must match")
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError("queries and keys must share the feature dim")
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError("keys and values must have the same length")


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    _validate(queries, keys, values, window, num_sinks, block_size)
    tgt_len, head_dim = queries.shape[-2], queries.shape[-1]
    src_len = keys.shape[-2]
    v_dim = values.shape[-1]
    batch_shape = queries.shape[:-2]
    device = queries.device
    offset = src_len - tgt_len
    scale = 1.0 / math.sqrt(head_dim)
    work_dtype = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype

    outputs = []
    for q_start in range(0, tgt_len, block_size):
        q_end = min(q_start + block_size, tgt_len)
        n_rows = q_end - q_start
        first_pos = q_start + offset
        last_pos = q_end - 1 + offset
        band_lo = max(first_pos - window + 1, 0)
        band_hi = min(last_pos + 1, src_len)
        n_sink = min(num_sinks, band_lo)
        if band_hi <= 0:
            # every row of this block sits before the first key
            outputs.append(queries.new_zeros(*batch_shape, n_rows, v_dim))
            continue

        k_blk = torch.cat([keys[..., :n_sink, :], keys[..., band_lo:band_hi, :]], dim=-2)
        v_blk = torch.cat([values[..., :n_sink, :], values[..., band_lo:band_hi, :]], dim=-2)
        key_pos = torch.cat([
            torch.arange(n_sink, device=device),
            torch.arange(band_lo, band_hi, device=device),
        ])
        q_pos = torch.arange(first_pos, last_pos + 1, device=device)

        kp = key_pos[None, :]
        qp = q_pos[:, None]
        allowed = (kp <= qp) & ((kp > qp - window) | (kp < num_sinks))

        q_blk = queries[..., q_start:q_end, :].to(work_dtype)
        scores = torch.matmul(q_blk, k_blk.to(work_dtype).transpose(-2, -1)) * scale
        scores = scores.masked_fill(~allowed, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        has_key = allowed.any(dim=-1, keepdim=True)
        probs = torch.where(has_key, probs, torch.zeros_like(probs))
        outputs.append(torch.matmul(probs, v_blk.to(work_dtype)).to(queries.dtype))

    if not outputs:
        return queries.new_zeros(*batch_shape, 0, v_dim)
    return torch.cat(outputs, dim=-2)
