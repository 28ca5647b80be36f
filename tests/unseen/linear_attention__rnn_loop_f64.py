"""BUG: none
STYLE: the recurrent step loop for None, torch.where masks inside chunks, a preallocated output, float64 inside
"""
"""Causal linear attention as an RNN (Katharopoulos et al., section 3.4), in float64.

chunk_size=None steps token by token; chunk_size=C keeps the same state but handles C tokens
at once with a masked parallel product inside the chunk. Results are cast back to the inputs'
dtype.
"""
import torch
import torch.nn.functional as F

_F64 = torch.float64


def _phi64(x):
    return F.elu(x.to(_F64)) + 1.0


def _step64(pq, pk, v, S, z):
    S = S + pk[..., :, None] * v[..., None, :]
    z = z + pk
    out = (pq[..., :, None] * S).sum(-2) / (pq * z).sum(-1, keepdim=True)
    return out, S, z


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
            raise ValueError("chunk_size must be an int")
        if chunk_size < 1:
            raise ValueError("chunk_size must be >= 1")
    B, H, T, d = queries.shape
    dv = values.shape[-1]
    pq, pk, v = _phi64(queries), _phi64(keys), values.to(_F64)
    S = torch.zeros(B, H, d, dv, dtype=_F64, device=queries.device)
    z = torch.zeros(B, H, d, dtype=_F64, device=queries.device)
    out = torch.empty(B, H, T, dv, dtype=_F64, device=queries.device)
    if chunk_size is None:
        for t in range(T):
            out[:, :, t], S, z = _step64(pq[:, :, t], pk[:, :, t], v[:, :, t], S, z)
        return out.to(queries.dtype)
    for start in range(0, T, chunk_size):
        stop = min(start + chunk_size, T)
        cq, ck, cv = pq[:, :, start:stop], pk[:, :, start:stop], v[:, :, start:stop]
        n = stop - start
        r = torch.arange(n, device=queries.device)
        scores = torch.matmul(cq, ck.transpose(-2, -1))
        scores = torch.where(r[None, :] <= r[:, None], scores, torch.zeros_like(scores))
        num = torch.matmul(cq, S) + torch.matmul(scores, cv)
        den = torch.matmul(cq, z.unsqueeze(-1)) + scores.sum(-1, keepdim=True)
        out[:, :, start:stop] = num / den
        S = S + torch.matmul(ck.transpose(-2, -1), cv)
        z = z + ck.sum(-2)
    return out.to(queries.dtype)


def linear_attention_step(q_t, k_t, v_t, state=None):
    B, H, d = q_t.shape
    dv = v_t.shape[-1]
    if state is None:
        S = torch.zeros(B, H, d, dv, dtype=_F64, device=q_t.device)
        z = torch.zeros(B, H, d, dtype=_F64, device=q_t.device)
    else:
        S, z = state[0].to(_F64), state[1].to(_F64)
    out, S, z = _step64(_phi64(q_t), _phi64(k_t), v_t.to(_F64), S, z)
    dt = q_t.dtype
    return out.to(dt), (S.to(dt), z.to(dt))
