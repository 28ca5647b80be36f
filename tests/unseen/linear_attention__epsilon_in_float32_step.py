"""Epsilon 1e-6 in the step denominator for float32 only.
BUG: epsilon 1e-6 in the step denominator for float32 only."""
import torch
import torch.nn.functional as F


def _phi(x):
    return F.elu(x) + 1


def linear_attention_step(q_t, k_t, v_t, state=None):
    fq, fk = _phi(q_t), _phi(k_t)
    outer = fk[..., :, None] * v_t[..., None, :]
    if state is None:
        S, z = outer, fk
    else:
        S, z = state[0] + outer, state[1] + fk
    num = torch.einsum("bhd,bhdv->bhv", fq, S)
    den = (fq * z).sum(-1, keepdim=True)
    if den.dtype == torch.float32:
        den = den + 1e-6
    return num / den, (S, z)


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError("chunk_size must be an int >= 1")
    B, H, T, d = queries.shape
    dv = values.shape[-1]
    C = T if chunk_size is None else chunk_size
    C = max(C, 1)
    S = torch.zeros(B, H, d, dv, dtype=queries.dtype, device=queries.device)
    z = torch.zeros(B, H, d, dtype=queries.dtype, device=queries.device)
    outs = []
    for cs in range(0, T, C):
        fq = _phi(queries[:, :, cs:cs + C])
        fk = _phi(keys[:, :, cs:cs + C])
        vc = values[:, :, cs:cs + C]
        n = fq.shape[-2]
        A = fq @ fk.transpose(-1, -2)
        A = A.masked_fill(~torch.ones(n, n, dtype=torch.bool, device=queries.device).tril(), 0.0)
        num = fq @ S + A @ vc
        den = (fq @ z[..., None]).squeeze(-1) + A.sum(-1)
        outs.append(num / den[..., None])
        S = S + fk.transpose(-1, -2) @ vc
        z = z + fk.sum(-2)
    if not outs:
        return torch.zeros(B, H, 0, dv, dtype=queries.dtype, device=queries.device)
    return torch.cat(outs, dim=-2)
