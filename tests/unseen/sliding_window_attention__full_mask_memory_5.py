"""BUG: builds the full (Tq, Tk) boolean mask up front and scores every query block against all Tk keys: values are right but allocations of Tq*Tk (and L*block_size*Tk) elements break the memory bound (e.g. Tq = Tk = 160, window 5, sinks 2, block 8, L = 2).
STAGE: none in values; the mask (its size)
STYLE: HF transformers' sliding-window causal mask (_prepare_4d_causal_attention_mask_with_cache_position) fed to an eager blocked loop
"""
import math

import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if window < 1 or num_sinks < 0 or block_size < 1:
        raise ValueError("invalid arguments")
    Tq, Tk = queries.shape[-2], keys.shape[-2]
    dev = queries.device
    pos = torch.arange(Tq, device=dev)[:, None] + (Tk - Tq)
    j = torch.arange(Tk, device=dev)[None, :]
    full_mask = (j <= pos) & ((j > pos - window) | (j < num_sinks))
    scale = 1.0 / math.sqrt(queries.shape[-1])
    outs = []
    for qs in range(0, Tq, block_size):
        qe = min(qs + block_size, Tq)
        m = full_mask[qs:qe]
        s = (queries[..., qs:qe, :] @ keys.transpose(-1, -2)) * scale
        s = s.masked_fill(~m, float("-inf"))
        w = torch.softmax(s, dim=-1).nan_to_num(0.0)
        outs.append(w @ values)
    return torch.cat(outs, dim=-2)
