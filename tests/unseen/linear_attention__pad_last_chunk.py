"""BUG: the last chunk padded: right values, past the memory bound where T % C != 0
STYLE: fla chunks
"""
"""Chunked causal linear attention with the sequence padded to a multiple of the chunk size, so
that the chunks come from one reshape (B, H, n, C, d), as many chunked kernels' wrappers do.
Padded keys get phi = 0 (they are masked out) and padded rows are dropped: values are right.

BUG: the padding copies the inputs to a larger tensor, over the contract's memory bound when T is
not a multiple of chunk_size.
"""
import torch
import torch.nn.functional as F


def _phi(x):
    return F.elu(x) + 1


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int)
                                   or chunk_size < 1):
        raise ValueError("chunk_size must be >= 1")
    B, H, T, d = queries.shape
    dv = values.shape[-1]
    C = T if chunk_size is None else chunk_size
    pad = (-T) % C
    q = F.pad(_phi(queries), (0, 0, 0, pad), value=1.0)
    k = F.pad(_phi(keys), (0, 0, 0, pad), value=0.0)
    v = F.pad(values, (0, 0, 0, pad))
    n = (T + pad) // C
    q, k, v = q.view(B, H, n, C, d), k.view(B, H, n, C, d), v.view(B, H, n, C, dv)
    tri = torch.ones(C, C, dtype=torch.bool, device=queries.device).tril()
    S = queries.new_zeros(B, H, d, dv)
    z = queries.new_zeros(B, H, d)
    outs = []
    for c in range(n):
        A = (q[:, :, c] @ k[:, :, c].transpose(-1, -2)) * tri
        num = q[:, :, c] @ S + A @ v[:, :, c]
        den = (q[:, :, c] * z[:, :, None, :]).sum(-1) + A.sum(-1)
        outs.append(num / den[..., None])
        S = S + k[:, :, c].transpose(-1, -2) @ v[:, :, c]
        z = z + k[:, :, c].sum(-2)
    return torch.cat(outs, 2)[:, :, :T]


def linear_attention_step(q_t, k_t, v_t, state=None):
    fq, fk = _phi(q_t), _phi(k_t)
    S_new = fk[..., :, None] * v_t[..., None, :]
    if state is not None:
        S_new = state[0] + S_new
        fk = state[1] + fk
    return (fq[..., None, :] @ S_new).squeeze(-2) / (fq * fk).sum(-1, keepdim=True), (S_new, fk)
