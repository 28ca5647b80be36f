"""BUG: intra-chunk mask strictly lower triangular (tril(-1)): token i does not see itself inside its chunk.
STAGE: the within-chunk term (its diagonal)
"""
import torch


def _phi(x):
    return torch.where(x > 0, x + 1, torch.exp(x.clamp(max=0)))


def linear_attention_step(q_t, k_t, v_t, state=None):
    B, H, d = q_t.shape
    dv = v_t.shape[-1]
    if state is None:
        S_prev = torch.zeros(B, H, d, dv, dtype=q_t.dtype, device=q_t.device)
        z_prev = torch.zeros(B, H, d, dtype=q_t.dtype, device=q_t.device)
    else:
        S_prev, z_prev = state
    pk, pq = _phi(k_t), _phi(q_t)
    S = S_prev + pk.unsqueeze(-1) * v_t.unsqueeze(-2)
    z = z_prev + pk
    num = (pq.unsqueeze(-2) @ S).squeeze(-2)
    den = (pq * z).sum(-1, keepdim=True)
    return num / den, (S, z)


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None and (type(chunk_size) is not int or chunk_size < 1):
        raise ValueError(f"bad chunk_size {chunk_size!r}")
    B, H, T, d = queries.shape
    dv = values.shape[-1]
    if chunk_size is None:
        state = None
        outs = []
        for t in range(T):
            o, state = linear_attention_step(queries[:, :, t], keys[:, :, t], values[:, :, t], state)
            outs.append(o)
        if not outs:
            return values.new_zeros(B, H, 0, dv)
        return torch.stack(outs, dim=2)
    L = B * H
    q = _phi(queries).reshape(L, T, d)
    k = _phi(keys).reshape(L, T, d)
    v = values.reshape(L, T, dv)
    S = torch.zeros(L, d, dv, dtype=queries.dtype, device=queries.device)
    z = torch.zeros(L, d, 1, dtype=queries.dtype, device=queries.device)
    out = []
    for start in range(0, T, chunk_size):
        qc = q[:, start:start + chunk_size]
        kc = k[:, start:start + chunk_size]
        vc = v[:, start:start + chunk_size]
        C = qc.shape[1]
        A = torch.bmm(qc, kc.transpose(1, 2))
        A = A * torch.tril(torch.ones(C, C, dtype=A.dtype, device=A.device), diagonal=-1)
        num = torch.bmm(qc, S) + torch.bmm(A, vc)
        den = torch.bmm(qc, z) + A.sum(-1, keepdim=True)
        out.append(num / den)
        S = S + torch.bmm(kc.transpose(1, 2), vc)
        z = z + kc.sum(1).unsqueeze(-1)
    return torch.cat(out, dim=1).reshape(B, H, T, dv)
