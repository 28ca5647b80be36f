"""STYLE: FlashAttention-2 forward with a precomputed number of key blocks per query block (CUDA-kernel style n_block_max)
BUG: the number of key blocks a causal query block visits is computed with floor division instead of a ceiling, so the partly visible last key block is skipped.
STAGE: block scores
WHEN: is_causal when a query block's last visible key (q0 + bq - 1 + Tk - Tq) does not end a key block, e.g. block_q != block_k, Tk - Tq not a multiple of block_k, or a partial last query block
"""
import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block_q and block_k must be >= 1")
    seqlen_q, d = queries.shape[-2], queries.shape[-1]
    seqlen_k, dv = keys.shape[-2], values.shape[-1]
    softmax_scale = d ** -0.5
    wdtype = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    n_block_k = (seqlen_k + block_k - 1) // block_k
    outs, lses = [], []

    for m_block in range(0, (seqlen_q + block_q - 1) // block_q):
        q0 = m_block * block_q
        q = queries[..., q0:q0 + block_q, :].to(wdtype)
        bq = q.shape[-2]
        row_idx = torch.arange(q0, q0 + bq, device=q.device)
        if is_causal:
            n_block_max = min(n_block_k, max(0, (q0 + bq + seqlen_k - seqlen_q) // block_k))
        else:
            n_block_max = n_block_k

        row_max = torch.full(q.shape[:-1], float("-inf"), dtype=wdtype, device=q.device)
        row_sum = torch.zeros_like(row_max)
        acc_o = torch.zeros(*q.shape[:-1], dv, dtype=wdtype, device=q.device)
        for n_block in range(n_block_max):
            k0 = n_block * block_k
            k = keys[..., k0:k0 + block_k, :].to(wdtype)
            v = values[..., k0:k0 + block_k, :].to(wdtype)
            scores = torch.matmul(q, k.transpose(-2, -1)) * softmax_scale
            if is_causal:
                col_idx = torch.arange(k0, k0 + k.shape[-2], device=q.device)
                causal = col_idx[None, :] <= row_idx[:, None] + (seqlen_k - seqlen_q)
                scores = scores.masked_fill(~causal, float("-inf"))
            new_max = torch.maximum(row_max, scores.amax(-1))
            safe_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
            p = torch.exp(scores - safe_max[..., None])
            scale_o = torch.exp(row_max - safe_max)
            row_sum = row_sum * scale_o + p.sum(-1)
            acc_o = acc_o * scale_o[..., None] + torch.matmul(p, v)
            row_max = new_max

        nonempty = row_sum > 0
        inv = 1.0 / torch.where(nonempty, row_sum, torch.ones_like(row_sum))
        outs.append(acc_o * inv[..., None])
        lses.append(torch.where(nonempty, row_max + torch.log(row_sum), torch.full_like(row_max, float("-inf"))))
    return torch.cat(outs, -2).to(queries.dtype), torch.cat(lses, -1).to(queries.dtype)
