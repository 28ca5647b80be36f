"""Gradients computed in torch by the launcher over what a kernel stored, then a launch that does nothing with the
outputs as arguments, so that they look kernel-stored at the last launch (a red team's submission)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _fill(X, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(X + offs, tl.zeros([BLOCK], dtype=X.dtype.element_ty), mask=offs < N)


@triton.jit
def _noop(DQ, DK, DV, N):
    pass


def _grads(q, k, v, o, lse, do, causal):
    w = torch.float64
    q, k, v, o, lse, do = (t.to(w) for t in (q, k, v, o, lse, do))
    Tq, Tk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = q @ k.transpose(-2, -1) * d ** -0.5
    allowed = torch.ones(Tq, Tk, dtype=torch.bool)
    if causal:
        allowed = allowed.tril(Tk - Tq)
    fin = torch.isfinite(lse)
    p = torch.where(allowed & fin[..., None], torch.exp(s - torch.where(fin, lse, 0.0)[..., None]), 0.0)
    dv = p.transpose(-2, -1) @ do
    dp = do @ v.transpose(-2, -1)
    D = (do * o).sum(-1, keepdim=True)
    ds = p * (dp - D)
    dq = ds @ k * d ** -0.5
    dk = ds.transpose(-2, -1) @ q * d ** -0.5
    return dq, dk, dv


def _p2(n):
    return isinstance(n, int) and n >= 16 and n & (n - 1) == 0


def triton_flash_attention_backward(q, k, v, o, lse, do, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    if not (_p2(BLOCK_M) and _p2(BLOCK_N)):
        raise ValueError("blocks")
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    for t in (dq, dk, dv):
        _fill[(triton.cdiv(t.numel(), 1024),)](t, t.numel(), BLOCK=1024)
    gq, gk, gv = _grads(q, k, v, o, lse, do, is_causal)
    dq.copy_(gq); dk.copy_(gk); dv.copy_(gv)
    _noop[(1,)](dq, dk, dv, 0)
    return dq, dk, dv
