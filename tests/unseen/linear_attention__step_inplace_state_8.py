"""BUG: S += ... writes into the state it was given
STYLE: recurrent step
"""
"""Causal linear attention, chunked, with an RNN-style decoding step.

BUG: linear_attention_step updates the given state in place (`S += ...`, `z += ...`), as a
recurrent decoding loop with a preallocated cache does; the contract says the given state is
never modified. Only calls with a state show it (the values returned are right).
"""
import torch
import torch.nn.functional as F


def _phi(x):
    return F.elu(x) + 1.0


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None and (type(chunk_size) is not int or chunk_size < 1):
        raise ValueError("chunk_size must be None or an int >= 1")
    q, k = _phi(queries), _phi(keys)
    T = q.shape[-2]
    if chunk_size is None:
        A = torch.tril(q @ k.transpose(-2, -1))
        return (A @ values) / A.sum(-1, keepdim=True)
    S = torch.zeros(*q.shape[:-2], q.shape[-1], values.shape[-1], dtype=q.dtype, device=q.device)
    z = torch.zeros(*q.shape[:-2], q.shape[-1], 1, dtype=q.dtype, device=q.device)
    out = []
    for a in range(0, T, chunk_size):
        qc, kc, vc = q[..., a:a + chunk_size, :], k[..., a:a + chunk_size, :], values[..., a:a + chunk_size, :]
        A = torch.tril(qc @ kc.transpose(-2, -1))
        out.append((qc @ S + A @ vc) / (qc @ z + A.sum(-1, keepdim=True)))
        S = S + kc.transpose(-2, -1) @ vc
        z = z + kc.sum(-2)[..., None]
    return torch.cat(out, dim=-2)


def linear_attention_step(q_t, k_t, v_t, state=None):
    fq, fk = _phi(q_t), _phi(k_t)
    if state is None:
        S = fk.new_zeros(*fk.shape, v_t.shape[-1])
        z = torch.zeros_like(fk)
    else:
        S, z = state
    S += fk[..., :, None] * v_t[..., None, :]
    z += fk
    out = (fq[..., None, :] @ S).squeeze(-2) / (fq * z).sum(-1, keepdim=True)
    return out, (S, z)
