"""
BUG: rows whose query sits before the first key (Tq > Tk) are masked entirely with -inf and softmaxed without a guard, so they come out NaN instead of 0 whenever they share a block with rows that do see keys.
STAGE: the softmax (rows with no allowed key)
Style: Mistral/xformers-like block loop with an explicit boolean mask and -inf fill.
"""
import math

import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if num_sinks < 0:
        raise ValueError(f"num_sinks must be >= 0, got {num_sinks}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if not (queries.dim() == keys.dim() == values.dim()) or not 2 <= queries.dim() <= 4:
        raise ValueError("queries, keys and values must have the same rank (2 to 4)")
    if queries.shape[:-2] != keys.shape[:-2] or keys.shape[:-2] != values.shape[:-2]:
        raise ValueError("leading dims must match")
    if queries.shape[-1] != keys.shape[-1] or keys.shape[-2] != values.shape[-2]:
        raise ValueError("shape mismatch")

    tgt_len, head_dim = queries.shape[-2], queries.shape[-1]
    src_len, v_dim = values.shape[-2], values.shape[-1]
    batch_shape = queries.shape[:-2]
    device = queries.device
    offset = src_len - tgt_len
    work_dtype = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype

    outputs = []
    for q_start in range(0, tgt_len, block_size):
        q_end = min(q_start + block_size, tgt_len)
        first_pos, last_pos = q_start + offset, q_end - 1 + offset
        band_lo = max(first_pos - window + 1, 0)
        band_hi = min(last_pos + 1, src_len)
        if band_hi <= 0:
            outputs.append(queries.new_zeros(*batch_shape, q_end - q_start, v_dim))
            continue
        n_sink = min(num_sinks, band_lo)
        k_blk = torch.cat([keys[..., :n_sink, :], keys[..., band_lo:band_hi, :]], dim=-2).to(work_dtype)
        v_blk = torch.cat([values[..., :n_sink, :], values[..., band_lo:band_hi, :]], dim=-2).to(work_dtype)
        key_pos = torch.cat([torch.arange(n_sink, device=device), torch.arange(band_lo, band_hi, device=device)])
        q_pos = torch.arange(first_pos, last_pos + 1, device=device)
        kp, qp = key_pos[None, :], q_pos[:, None]
        allowed = (kp <= qp) & ((kp > qp - window) | (kp < num_sinks))

        scores = queries[..., q_start:q_end, :].to(work_dtype) @ k_blk.transpose(-2, -1)
        scores = scores / math.sqrt(head_dim)
        scores = scores.masked_fill(~allowed, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        outputs.append((probs @ v_blk).to(queries.dtype))
    if not outputs:
        return queries.new_zeros(*batch_shape, 0, v_dim)
    return torch.cat(outputs, dim=-2)
