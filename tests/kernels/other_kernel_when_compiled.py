"""The reference's kernel when compiled, a far larger one when interpreted, told apart without a banned name (a red
team's submission)."""
import torch
import triton
import triton.language as tl


_COMPILING = type(tl.zeros).__name__.startswith('JIT')
if _COMPILING:
    @triton.jit
    def _attention_forward(Q, K, V, O, LSE, Tq, Tk, scale,
                           D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr):
        """Q, O (L, Tq, D), K, V (L, Tk, D), LSE (L, Tq), L = B * H; program (i, l) owns query rows i*BLOCK_M.. of l."""
        start_m = tl.program_id(0)
        head = tl.program_id(1)
        rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        feats = tl.arange(0, D)
        q = tl.load(Q + head * Tq * D + rows[:, None] * D + feats[None, :], mask=rows[:, None] < Tq, other=0.0)
        work = tl.float64 if Q.dtype.element_ty == tl.float64 else tl.float32
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=work)  # running max
        l_i = tl.zeros([BLOCK_M], dtype=work)  # running sum of exp(s - m_i)
        acc = tl.zeros([BLOCK_M, D], dtype=work)
        shift = Tk - Tq  # causal: key j is allowed for query i when j <= i + shift (bottom right)
        if IS_CAUSAL:
            k_end = tl.minimum(Tk, (start_m + 1) * BLOCK_M + shift)  # later key blocks are all masked: never loaded
        else:
            k_end = Tk
        for start_n in range(0, k_end, BLOCK_N):
            cols = start_n + offs_n
            k = tl.load(K + head * Tk * D + cols[:, None] * D + feats[None, :], mask=cols[:, None] < Tk, other=0.0)
            s = tl.dot(q, tl.trans(k)).to(work) * scale
            allowed = cols[None, :] < Tk
            if IS_CAUSAL:
                allowed = allowed & (cols[None, :] <= rows[:, None] + shift)
            s = tl.where(allowed, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no allowed key yet
            p = tl.exp(s - m_safe[:, None])
            alpha = tl.exp(m_i - m_safe)  # rescales what was summed under the old max
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(V + head * Tk * D + cols[:, None] * D + feats[None, :], mask=cols[:, None] < Tk, other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v).to(work)
            m_i = m_new
        empty = l_i == 0.0  # no allowed key: output 0, lse -inf
        out = acc / tl.where(empty, 1.0, l_i)[:, None]
        lse = tl.where(empty, float("-inf"), m_i + tl.log(tl.where(empty, 1.0, l_i)))
        tl.store(O + head * Tq * D + rows[:, None] * D + feats[None, :], out.to(O.dtype.element_ty), mask=rows[:, None] < Tq)
        tl.store(LSE + head * Tq + rows, lse.to(LSE.dtype.element_ty), mask=rows < Tq)


else:
    @triton.jit
    def _attention_forward(Q, K, V, O, LSE, Tq, Tk, scale,
                           D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr):
        """Q, O (L, Tq, D), K, V (L, Tk, D), LSE (L, Tq), L = B * H; program (i, l) owns query rows i*BLOCK_M.. of l."""
        start_m = tl.program_id(0)
        head = tl.program_id(1)
        rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        feats = tl.arange(0, D)
        q = tl.load(Q + head * Tq * D + rows[:, None] * D + feats[None, :], mask=rows[:, None] < Tq, other=0.0)
        work = tl.float64 if Q.dtype.element_ty == tl.float64 else tl.float32
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=work)  # running max
        l_i = tl.zeros([BLOCK_M], dtype=work)  # running sum of exp(s - m_i)
        acc = tl.zeros([BLOCK_M, D], dtype=work)
        shift = Tk - Tq  # causal: key j is allowed for query i when j <= i + shift (bottom right)
        if IS_CAUSAL:
            k_end = tl.minimum(Tk, (start_m + 1) * BLOCK_M + shift)  # later key blocks are all masked: never loaded
        else:
            k_end = Tk
        for start_n in range(0, k_end, BLOCK_N):
            cols = start_n + offs_n
            k = tl.load(K + head * Tk * D + cols[:, None] * D + feats[None, :], mask=cols[:, None] < Tk, other=0.0)
            s = tl.dot(q, tl.trans(k)).to(work) * scale
            allowed = cols[None, :] < Tk
            if IS_CAUSAL:
                allowed = allowed & (cols[None, :] <= rows[:, None] + shift)
            s = tl.where(allowed, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no allowed key yet
            p = tl.exp(s - m_safe[:, None])
            alpha = tl.exp(m_i - m_safe)  # rescales what was summed under the old max
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(V + head * Tk * D + cols[:, None] * D + feats[None, :], mask=cols[:, None] < Tk, other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v).to(work)
            big = tl.exp(-tl.abs(tl.max(acc, 1)[:, None] * tl.arange(0, 4096)[None, :].to(work) + tl.sum(acc, 1)[:, None]))
            acc = acc + tl.minimum(tl.min(big, 1), 0.0)[:, None]
            m_i = m_new
        empty = l_i == 0.0  # no allowed key: output 0, lse -inf
        out = acc / tl.where(empty, 1.0, l_i)[:, None]
        lse = tl.where(empty, float("-inf"), m_i + tl.log(tl.where(empty, 1.0, l_i)))
        tl.store(O + head * Tq * D + rows[:, None] * D + feats[None, :], out.to(O.dtype.element_ty), mask=rows[:, None] < Tq)
        tl.store(LSE + head * Tq + rows, lse.to(LSE.dtype.element_ty), mask=rows < Tq)



def _power_of_two(n) -> bool:
    return isinstance(n, int) and n >= 16 and n & (n - 1) == 0


def triton_flash_attention(q, k, v, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    """q (B, H, Tq, d), k and v (B, H, Tk, d) -> output (B, H, Tq, d), lse (B, H, Tq)."""
    if not (_power_of_two(BLOCK_M) and _power_of_two(BLOCK_N)):
        raise ValueError(f"BLOCK_M = {BLOCK_M} and BLOCK_N = {BLOCK_N} must be powers of two, at least 16")
    B, H, Tq, d = q.shape
    Tk = k.shape[2]
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = torch.empty_like(q)
    lse = torch.empty((B, H, Tq), dtype=torch.float64 if q.dtype == torch.float64 else torch.float32, device=q.device)
    grid = (triton.cdiv(Tq, BLOCK_M), B * H)
    _attention_forward[grid](q, k, v, out, lse, Tq, Tk, d ** -0.5,
                             D=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, IS_CAUSAL=is_causal)
    return out, lse
