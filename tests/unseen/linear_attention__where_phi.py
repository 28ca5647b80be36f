"""BUG: none
STYLE: phi written by hand with torch.where(x > 0, x + 1, exp(x)) (exp of x clamped at 0, so the
unused branch cannot overflow and poison the gradient); chunk_size None uses the masked (T, T)
parallel form with torch.tril; chunks take denominators from a cumsum of phi(k) inside the chunk.
"""
import torch


def phi(x):
    return torch.where(x > 0, x + 1, torch.exp(torch.clamp(x, max=0)))


def _upcast(t):
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def linear_attention_step(q_t, k_t, v_t, state=None):
    q = phi(_upcast(q_t))
    k = phi(_upcast(k_t))
    v = _upcast(v_t)
    outer = torch.matmul(k.unsqueeze(-1), v.unsqueeze(-2))
    if state is not None:
        S = _upcast(state[0]) + outer
        z = _upcast(state[1]) + k
    else:
        S = outer
        z = k
    out = torch.matmul(q.unsqueeze(-2), S).squeeze(-2) / torch.matmul(
        q.unsqueeze(-2), z.unsqueeze(-1)
    ).squeeze(-1)
    return out.to(q_t.dtype), (S.to(q_t.dtype), z.to(q_t.dtype))


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None and (
        isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size <= 0
    ):
        raise ValueError("chunk_size must be None or an integer >= 1")
    q = phi(_upcast(queries))
    k = phi(_upcast(keys))
    v = _upcast(values)
    T = q.shape[-2]

    if chunk_size is None:
        A = torch.tril(torch.matmul(q, k.transpose(-2, -1)))
        out = torch.matmul(A, v) / A.sum(dim=-1, keepdim=True)
        return out.to(queries.dtype)

    B, H, _, d = q.shape
    dv = v.shape[-1]
    S = torch.zeros(B, H, d, dv, dtype=q.dtype, device=q.device)
    z = torch.zeros(B, H, d, dtype=q.dtype, device=q.device)
    chunks = []
    for start in range(0, T, chunk_size):
        sl = slice(start, min(start + chunk_size, T))
        qc, kc, vc = q[..., sl, :], k[..., sl, :], v[..., sl, :]
        A = torch.tril(torch.matmul(qc, kc.transpose(-2, -1)))
        num = torch.matmul(qc, S) + torch.matmul(A, vc)
        z_run = z.unsqueeze(-2) + torch.cumsum(kc, dim=-2)  # (B, H, c, d)
        den = (qc * z_run).sum(dim=-1, keepdim=True)
        chunks.append(num / den)
        S = S + torch.matmul(kc.transpose(-2, -1), vc)
        z = z_run[..., -1, :]
    return torch.cat(chunks, dim=-2).to(queries.dtype)
