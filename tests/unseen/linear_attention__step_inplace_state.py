"""BUG: linear_attention_step accumulates into the given state with S.add_() and z.add_(), so the caller's (S, z) tensors are modified in place (outputs are right, the side effect is not).
STAGE: the state update (in place on the caller's tensors)
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
    if state is None:
        B, H, d = q.shape
        state = (q.new_zeros(B, H, d, v.shape[-1]), q.new_zeros(B, H, d))
    S, z = state
    S.add_(torch.matmul(k.unsqueeze(-1), v.unsqueeze(-2)).to(S.dtype))
    z.add_(k.to(z.dtype))
    Sc, zc = _upcast(S), _upcast(z)
    out = torch.matmul(q.unsqueeze(-2), Sc).squeeze(-2) / (q * zc).sum(-1, keepdim=True)
    return out.to(q_t.dtype), (S, z)


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
        return (torch.matmul(A, v) / A.sum(dim=-1, keepdim=True)).to(queries.dtype)

    B, H, _, d = q.shape
    S = torch.zeros(B, H, d, v.shape[-1], dtype=q.dtype, device=q.device)
    z = torch.zeros(B, H, d, dtype=q.dtype, device=q.device)
    chunks = []
    for start in range(0, T, chunk_size):
        sl = slice(start, min(start + chunk_size, T))
        qc, kc, vc = q[..., sl, :], k[..., sl, :], v[..., sl, :]
        A = torch.tril(torch.matmul(qc, kc.transpose(-2, -1)))
        num = torch.matmul(qc, S) + torch.matmul(A, vc)
        den = torch.matmul(qc, z.unsqueeze(-1)) + A.sum(dim=-1, keepdim=True)
        chunks.append(num / den)
        S = S + torch.matmul(kc.transpose(-2, -1), vc)
        z = z + kc.sum(dim=-2)
    return torch.cat(chunks, dim=-2).to(queries.dtype)
