"""Tiled attention that carries each row's log-sum-exp instead of a max and a sum (logaddexp merges blocks),
with causal blocks skipped when no query of the block sees them."""
import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if min(block_q, block_k) < 1:
        raise ValueError(f"block_q and block_k must be >= 1, got {block_q}, {block_k}")
    Tq, Tk, d = queries.shape[-2], keys.shape[-2], queries.shape[-1]
    dt = torch.promote_types(queries.dtype, torch.float32)
    out_blocks, lse_blocks = [], []
    for qs in range(0, Tq, block_q):
        q = queries[..., qs:qs + block_q, :].to(dt)
        n = q.shape[-2]
        lse = torch.full(q.shape[:-1], float("-inf"), dtype=dt, device=q.device)
        out = torch.zeros(*q.shape[:-1], values.shape[-1], dtype=dt, device=q.device)
        for ks in range(0, Tk, block_k):
            if is_causal and ks > qs + n - 1 + Tk - Tq:
                break  # every later key block is in the future of every query of this block
            k, v = keys[..., ks:ks + block_k, :].to(dt), values[..., ks:ks + block_k, :].to(dt)
            s = torch.einsum("...id,...jd->...ij", q, k) * d ** -0.5
            if is_causal:
                i = torch.arange(qs, qs + n, device=q.device)[:, None]
                j = torch.arange(ks, ks + k.shape[-2], device=q.device)[None, :]
                s = s.masked_fill(j > i + Tk - Tq, float("-inf"))
            block_lse = torch.logsumexp(s, dim=-1)
            new = torch.logaddexp(lse, block_lse)
            safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
            p = torch.exp(s - safe[..., None])
            out = out * torch.exp(lse - safe)[..., None] + torch.einsum("...ij,...jd->...id", p, v)
            lse = new
        out_blocks.append(out)
        lse_blocks.append(lse)
    return torch.cat(out_blocks, -2).to(queries.dtype), torch.cat(lse_blocks, -1).to(queries.dtype)
