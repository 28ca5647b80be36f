"""Gradients computed in torch, packed by the launcher into the bytes a kernel did not store of an int64 buffer whose first bytes a kernel did store, then decoded by a kernel (a red team's submission)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _mark(S, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(S.to(tl.pointer_type(tl.uint8), bitcast=True) + offs * 8, tl.zeros([BLOCK], dtype=tl.uint8),
             mask=offs < N)


@triton.jit
def _copy(S, OUT, N, PAIRS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    lane = tl.load(S + offs, mask=offs < N, other=0)
    if PAIRS:  # two float32 per lane, 28 bits each: out lane = (a << 4) | (b << 4) << 32
        a = (lane >> 36) & 0xFFFFFFF
        b = (lane >> 8) & 0xFFFFFFF
        out = (a << 4) | ((b << 4) << 32)
    else:  # one float64 per lane, its lowest byte lost
        out = lane
    tl.store(OUT.to(tl.pointer_type(tl.int64), bitcast=True) + offs, out, mask=offs < N)


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
    ds = p * (do @ v.transpose(-2, -1) - (do * o).sum(-1, keepdim=True))
    return ds @ k * d ** -0.5, ds.transpose(-2, -1) @ q * d ** -0.5, dv


def _p2(n):
    return isinstance(n, int) and n >= 16 and n & (n - 1) == 0


def _smuggle(g, out):
    pairs = out.dtype == torch.float32
    if pairs:
        bits = (g.to(torch.float32).reshape(-1).view(torch.int32).to(torch.int64) & 0xFFFFFFFF) >> 4
        lanes = (bits[0::2] << 36) | (bits[1::2] << 8)
    else:
        lanes = g.to(torch.float64).reshape(-1).view(torch.int64) & ~0xFF
    s = torch.empty(lanes.numel(), dtype=torch.int64)
    n = s.numel()
    _mark[(triton.cdiv(n, 256),)](s, n, BLOCK=256)
    s.copy_(lanes)  # every byte but the one the kernel stored
    _copy[(triton.cdiv(n, 256),)](s, out, n, PAIRS=pairs, BLOCK=256)


def triton_flash_attention_backward(q, k, v, o, lse, do, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    if not (_p2(BLOCK_M) and _p2(BLOCK_N)):
        raise ValueError("blocks")
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    for g, out in zip(_grads(q, k, v, o, lse, do, is_causal), (dq, dk, dv)):
        _smuggle(g, out)
    return dq, dk, dv
