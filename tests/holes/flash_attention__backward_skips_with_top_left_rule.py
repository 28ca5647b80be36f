"""FlashAttention forward (tiled, online softmax) with a hand-written FlashAttention-2 backward (torch.autograd.Function):
the backward recomputes each tile's probabilities from the saved lse instead of keeping the (Tq, Tk) graph."""
import torch


def _forward(queries, keys, values, is_causal, block_q, block_k):
    Tq, d = queries.shape[-2], queries.shape[-1]
    Tk, dv = keys.shape[-2], values.shape[-1]
    scale = d ** -0.5
    work = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    shift = Tk - Tq  # bottom-right alignment
    outs, lses = [], []
    for q0 in range(0, Tq, block_q):
        q = queries[..., q0:q0 + block_q, :].to(work)
        bq = q.shape[-2]
        q_pos = torch.arange(q0, q0 + bq, device=queries.device)
        m = torch.full(q.shape[:-1], float("-inf"), dtype=work, device=queries.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(*q.shape[:-1], dv, dtype=work, device=queries.device)
        k_end = min(Tk, q0 + bq + shift) if is_causal else Tk
        for k0 in range(0, max(k_end, 0), block_k):
            k = keys[..., k0:k0 + block_k, :].to(work)
            v = values[..., k0:k0 + block_k, :].to(work)
            s = (q @ k.transpose(-2, -1)) * scale
            if is_causal:
                k_pos = torch.arange(k0, k0 + k.shape[-2], device=queries.device)
                s = s.masked_fill(~(k_pos[None, :] <= q_pos[:, None] + shift), float("-inf"))
            m_new = torch.maximum(m, s.amax(-1))
            m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
            p = torch.exp(s - m_safe[..., None])
            alpha = torch.exp(m - m_safe)
            l = l * alpha + p.sum(-1)
            acc = acc * alpha[..., None] + p @ v
            m = m_new
        empty = l == 0
        outs.append(acc / torch.where(empty, torch.ones_like(l), l)[..., None])
        lses.append(torch.where(empty, torch.full_like(m, float("-inf")), m + torch.log(l)))
    return torch.cat(outs, dim=-2).to(queries.dtype), torch.cat(lses, dim=-1).to(queries.dtype)


class _Flash(torch.autograd.Function):
    @staticmethod
    def forward(ctx, queries, keys, values, is_causal, block_q, block_k):
        out, lse = _forward(queries, keys, values, is_causal, block_q, block_k)
        ctx.save_for_backward(queries, keys, values, out, lse)
        ctx.args = (is_causal, block_q, block_k)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, d_out, d_lse):
        queries, keys, values, out, lse = ctx.saved_tensors
        is_causal, block_q, block_k = ctx.args
        Tq, d, Tk = queries.shape[-2], queries.shape[-1], keys.shape[-2]
        scale = d ** -0.5
        work = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
        q, k, v, o, do = (t.to(work) for t in (queries, keys, values, out, d_out))
        lse = lse.to(work)
        lse = torch.where(torch.isfinite(lse), lse, torch.full_like(lse, float("inf")))  # empty rows: P = 0
        delta = (do * o).sum(-1)  # rowsum(dO * O), (..., Tq)
        shift = Tk - Tq
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for k0 in range(0, Tk, block_k):  # outer loop over key blocks (FlashAttention-2's backward)
            kb, vb = k[..., k0:k0 + block_k, :], v[..., k0:k0 + block_k, :]
            k_pos = torch.arange(k0, k0 + kb.shape[-2], device=q.device)
            # causal: query blocks above the diagonal see none of these keys; start at the diagonal block
            start = (k0 // block_q) * block_q if is_causal else 0
            for q0 in range(start, Tq, block_q):
                qb, dob = q[..., q0:q0 + block_q, :], do[..., q0:q0 + block_q, :]
                s = (qb @ kb.transpose(-2, -1)) * scale
                if is_causal:
                    q_pos = torch.arange(q0, q0 + qb.shape[-2], device=q.device)
                    s = s.masked_fill(~(k_pos[None, :] <= q_pos[:, None] + shift), float("-inf"))
                p = torch.exp(s - lse[..., q0:q0 + block_q, None])
                dv[..., k0:k0 + block_k, :] += p.transpose(-2, -1) @ dob
                dp = dob @ vb.transpose(-2, -1)
                ds = p * (dp - delta[..., q0:q0 + block_q, None])
                dq[..., q0:q0 + block_q, :] += ds @ kb * scale
                dk[..., k0:k0 + block_k, :] += ds.transpose(-2, -1) @ qb * scale
        return dq.to(queries.dtype), dk.to(keys.dtype), dv.to(values.dtype), None, None, None


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError(f"flash_attention: block_q = {block_q} and block_k = {block_k} must both be at least 1")
    return _Flash.apply(queries, keys, values, bool(is_causal), block_q, block_k)
