"""BUG: none
STYLE: log-space accumulation: each key block yields a normalised partial output and its block lse; the running (out, lse) pair is merged with weights exp(lse_part - lse_total), guarded for rows still at -inf.
"""
import math

import torch


def _safe(t):
    return torch.where(torch.isfinite(t), t, torch.zeros_like(t))


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if not (block_q >= 1 and block_k >= 1):
        raise ValueError("flash_attention: block sizes must be at least 1")
    Tq, d = queries.shape[-2:]
    Tk = keys.shape[-2]
    dv = values.shape[-1]
    dtype = queries.dtype
    wd = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    scale = 1.0 / math.sqrt(d)
    diag = Tk - Tq
    dev = queries.device
    ninf = float("-inf")

    o_parts, lse_parts = [], []
    for i0 in range(0, Tq, block_q):
        i1 = min(i0 + block_q, Tq)
        q = queries[..., i0:i1, :].to(wd)
        run_o = torch.zeros(*q.shape[:-1], dv, dtype=wd, device=dev)
        run_lse = torch.full(q.shape[:-1], ninf, dtype=wd, device=dev)
        for j0 in range(0, Tk, block_k):
            j1 = min(j0 + block_k, Tk)
            if is_causal and j0 > i1 - 1 + diag:
                break
            s = (q @ keys[..., j0:j1, :].to(wd).transpose(-1, -2)) * scale
            if is_causal:
                ok = torch.arange(j0, j1, device=dev)[None, :] <= torch.arange(i0, i1, device=dev)[:, None] + diag
                s = s.masked_fill(~ok, ninf)
            bmax = _safe(s.amax(-1, keepdim=True))
            e = torch.exp(s - bmax)
            bsum = e.sum(-1, keepdim=True)
            nonzero = bsum > 0
            bsum_safe = torch.where(nonzero, bsum, torch.ones_like(bsum))
            part_o = (e @ values[..., j0:j1, :].to(wd)) / bsum_safe
            part_lse = torch.where(nonzero, bmax + torch.log(bsum_safe), torch.full_like(bsum, ninf)).squeeze(-1)
            top = torch.maximum(run_lse, part_lse)
            top_s = _safe(top)
            w_run = torch.exp(run_lse - top_s)
            w_part = torch.exp(part_lse - top_s)
            tot = w_run + w_part
            tot_safe = torch.where(tot > 0, tot, torch.ones_like(tot))
            run_o = (run_o * w_run[..., None] + part_o * w_part[..., None]) / tot_safe[..., None]
            run_lse = torch.where(tot > 0, top_s + torch.log(tot_safe), torch.full_like(tot, ninf))
        o_parts.append(run_o)
        lse_parts.append(run_lse)
    return torch.cat(o_parts, -2).to(dtype), torch.cat(lse_parts, -1).to(dtype)
