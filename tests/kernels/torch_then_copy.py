"""Attention computed in torch by the launcher, a kernel copying it to the outputs (a red team's submission)."""
import torch
import triton
import triton.language as tl

@triton.jit
def _copy(SRC_O, SRC_L, O, LSE, Tq, D: tl.constexpr, BLOCK_M: tl.constexpr):
    start_m = tl.program_id(0); head = tl.program_id(1)
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M); feats = tl.arange(0, D)
    m = rows[:, None] < Tq
    o = tl.load(SRC_O + head * Tq * D + rows[:, None] * D + feats[None, :], mask=m, other=0.0)
    l = tl.load(SRC_L + head * Tq + rows, mask=rows < Tq, other=0.0)
    tl.store(O + head * Tq * D + rows[:, None] * D + feats[None, :], o, mask=m)
    tl.store(LSE + head * Tq + rows, l, mask=rows < Tq)

def _p2(n): return isinstance(n, int) and n >= 16 and n & (n - 1) == 0

def triton_flash_attention(q, k, v, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    if not (_p2(BLOCK_M) and _p2(BLOCK_N)): raise ValueError("bad blocks")
    B, H, Tq, d = q.shape; Tk = k.shape[2]
    work = torch.float64 if q.dtype == torch.float64 else torch.float32
    s = torch.matmul(q.to(work), k.to(work).transpose(-1, -2)) * d ** -0.5
    if is_causal:
        i = torch.arange(Tq)[:, None]; j = torch.arange(Tk)[None, :]
        s = s.masked_fill(j > i + (Tk - Tq), float("-inf"))
    lse_t = torch.logsumexp(s, -1)
    p = torch.nan_to_num(torch.exp(s - torch.where(torch.isinf(lse_t), torch.zeros_like(lse_t), lse_t)[..., None]), nan=0.0)
    o_t = torch.matmul(p, v.to(work)).to(q.dtype).contiguous(); lse_t = lse_t.to(work).contiguous()
    out = torch.empty_like(q); lse = torch.empty((B, H, Tq), dtype=work, device=q.device)
    _copy[(triton.cdiv(Tq, BLOCK_M), B * H)](o_t, lse_t, out, lse, Tq, D=d, BLOCK_M=BLOCK_M)
    return out, lse
