"""BUG: none
STYLE: the "attention matrix" form. chunk_size None: A = phi(Q) phi(K)^T, causal tril, out = (A V) / rowsum(A) (quadratic, as a masked linear attention without the state). chunk_size C: the same per chunk plus the running state, via a recurrence over chunk index, vectorised within chunks; state update written with outer-product sums. step: einsum-free broadcasting.
"""
import torch
import torch.nn.functional as F


def phi(x):
    return F.elu(x, alpha=1.0) + 1


def linear_attention_step(q_t, k_t, v_t, state=None):
    fk = phi(k_t)
    upd = fk[..., :, None] * v_t[..., None, :]
    if state is not None:
        S = state[0] + upd
        z = state[1] + fk
    else:
        S = upd
        z = fk.clone()
    fq = phi(q_t)
    out = (fq[..., :, None] * S).sum(-2) / (fq * z).sum(-1)[..., None]
    return out, (S, z)


def _block(fq, fk, v):
    T = fq.shape[-2]
    A = fq @ fk.transpose(-1, -2)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=fq.device))
    A = torch.where(mask, A, torch.zeros_like(A))
    return A @ v, A.sum(-1)


def causal_linear_attention(queries, keys, values, chunk_size=None):
    fq, fk = phi(queries), phi(keys)
    if chunk_size is None:
        num, den = _block(fq, fk, values)
        return num / den.unsqueeze(-1)
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool):
        raise ValueError("chunk_size must be an int")
    if chunk_size < 1:
        raise ValueError("chunk_size must be >= 1")
    T = queries.shape[-2]
    S = None
    z = None
    pieces = []
    for i in range(0, T, chunk_size):
        cq, ck, cv = fq[..., i:i + chunk_size, :], fk[..., i:i + chunk_size, :], values[..., i:i + chunk_size, :]
        num, den = _block(cq, ck, cv)
        if S is not None:
            num = num + cq @ S
            den = den + (cq * z.unsqueeze(-2)).sum(-1)
        pieces.append(num / den.unsqueeze(-1))
        dS = ck.transpose(-1, -2) @ cv
        dz = ck.sum(-2)
        S = dS if S is None else S + dS
        z = dz if z is None else z + dz
    return torch.cat(pieces, dim=-2)
