"""The backward pass of attention by hand, FlashAttention-2 style: query blocks of 128 rows, key blocks of 128 keys,
the forward's statistics recomputed per query block (sum of exponentials under the row maximum), then dV, dK, dQ block by block."""
import torch

BLOCK_M = 128  # query rows per block (FlashAttention-2's usual tile)
BLOCK_N = 128  # keys per block


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    Tq, Tk, d = queries.shape[-2], keys.shape[-2], queries.shape[-1]
    scale = d ** -0.5
    work = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    q, k, v, do = (t.to(work) for t in (queries, keys, values, grad_output))
    shift = Tk - Tq  # causal, aligned bottom right: key j for query i when j <= i + shift
    dq = torch.zeros_like(q)
    dk = torch.zeros_like(k)
    dv = torch.zeros_like(v)
    for q0 in range(0, Tq, BLOCK_M):
        qb, dob = q[..., q0:q0 + BLOCK_M, :], do[..., q0:q0 + BLOCK_M, :]
        bm = qb.shape[-2]
        rows = q0 + torch.arange(bm, device=q.device)  # the block's query positions

        def block_scores(k0):
            s = qb @ k[..., k0:k0 + BLOCK_N, :].transpose(-2, -1) * scale
            if is_causal:
                cols = k0 + torch.arange(s.shape[-1], device=q.device)
                allowed = cols[None, :] <= rows[:, None] + shift
                s = s.masked_fill(~allowed, float("-inf"))
            return s

        # pass 1: the forward's max, sum and output for this query block
        m = torch.full(qb.shape[:-1], float("-inf"), dtype=work, device=q.device)
        l = torch.zeros_like(m)
        o = torch.zeros(*qb.shape[:-1], v.shape[-1], dtype=work, device=q.device)
        for k0 in range(0, Tk, BLOCK_N):
            s = block_scores(k0)
            if k0 == 0:  # the row maximum, from the first key block
                m = s.amax(-1)
            m_safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
            p = torch.exp(s - m_safe[..., None])
            l = l + p.sum(-1)
            o = o + p @ v[..., k0:k0 + BLOCK_N, :]
        empty = l == 0  # a row with no allowed key (causal, Tq > Tk): it contributes nothing
        o = o / torch.where(empty, torch.ones_like(l), l)[..., None]
        lse = torch.where(empty, torch.full_like(m, float("inf")), m + torch.log(torch.where(empty, torch.ones_like(l), l)))
        delta = (dob * o).sum(-1, keepdim=True)  # rowsum(dO * O)
        # pass 2: the gradients, key block by key block
        for k0 in range(0, Tk, BLOCK_N):
            kb, vb = k[..., k0:k0 + BLOCK_N, :], v[..., k0:k0 + BLOCK_N, :]
            p = torch.exp(block_scores(k0) - lse[..., None])  # exp(-inf) = 0 on masked keys and empty rows
            dv[..., k0:k0 + BLOCK_N, :] += p.transpose(-2, -1) @ dob
            dp = dob @ vb.transpose(-2, -1)
            ds = p * (dp - delta)
            dq[..., q0:q0 + BLOCK_M, :] += ds @ kb * scale
            dk[..., k0:k0 + BLOCK_N, :] += ds.transpose(-2, -1) @ qb * scale
    return dq.to(queries.dtype), dk.to(keys.dtype), dv.to(values.dtype)
