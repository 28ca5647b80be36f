"""BUG: none
STYLE: FlashAttention-1's Algorithm 1 (key blocks outer), O/l/m preallocated and written per block, float64 inside
"""
"""FlashAttention-1, Algorithm 1 of Dao et al. (2022), transcribed to PyTorch.

Outer loop over K/V blocks j, inner loop over Q blocks i. O, l and m live in "HBM"
(preallocated tensors) and are read and written per block; O is kept normalised, as in the
paper. Everything is computed in float64 and cast back at the end.
"""
import math

import torch

NEG_INF = float("-inf")


def _check_block(name, b):
    if isinstance(b, bool) or not isinstance(b, int) or b < 1:
        raise ValueError(f"{name} must be an int >= 1, got {b!r}")


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    _check_block("block_q", block_q)
    _check_block("block_k", block_k)
    Tq, d = queries.shape[-2:]
    Tk, dv = keys.shape[-2], values.shape[-1]
    lead = queries.shape[:-2]
    f64 = torch.float64
    Q, K, V = queries.to(f64), keys.to(f64), values.to(f64)
    scale = 1.0 / math.sqrt(d)
    shift = Tk - Tq

    O = torch.zeros(*lead, Tq, dv, dtype=f64, device=queries.device)
    l = torch.zeros(*lead, Tq, dtype=f64, device=queries.device)
    m = torch.full((*lead, Tq), NEG_INF, dtype=f64, device=queries.device)

    for k0 in range(0, Tk, block_k):                      # line 5: for 1 <= j <= T_c
        k1 = min(k0 + block_k, Tk)
        Kj, Vj = K[..., k0:k1, :], V[..., k0:k1, :]
        kpos = torch.arange(k0, k1, device=queries.device)
        for q0 in range(0, Tq, block_q):                  # line 7: for 1 <= i <= T_r
            q1 = min(q0 + block_q, Tq)
            if is_causal and k0 > q1 - 1 + shift:
                continue                                  # no query of this block sees block j
            Sij = (Q[..., q0:q1, :] @ Kj.transpose(-1, -2)) * scale
            if is_causal:
                qpos = torch.arange(q0, q1, device=queries.device) + shift
                Sij = torch.where(kpos[None, :] <= qpos[:, None], Sij,
                                  torch.tensor(NEG_INF, dtype=f64, device=queries.device))
            m_i, l_i, O_i = m[..., q0:q1].clone(), l[..., q0:q1].clone(), O[..., q0:q1, :].clone()
            m_tilde = Sij.amax(-1)
            m_new = torch.maximum(m_i, m_tilde)
            m_ref = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
            P = torch.exp(Sij - m_ref[..., None])
            a_old = torch.exp(m_i - m_ref) * l_i
            l_new = a_old + P.sum(-1)
            l_div = torch.where(l_new > 0, l_new, torch.ones_like(l_new))
            O[..., q0:q1, :] = (a_old[..., None] * O_i + P @ Vj) / l_div[..., None]
            l[..., q0:q1] = l_new
            m[..., q0:q1] = m_new

    pos = l > 0
    lse = torch.where(pos, m + torch.log(torch.where(pos, l, torch.ones_like(l))),
                      torch.full_like(l, NEG_INF))
    return O.to(queries.dtype), lse.to(queries.dtype)
