"""BUG: the chunked path loops over chunks but takes each chunk's starting state from a cumulative sum over all T of the outer products phi(k_j) v_j^T, a (B, H, T, d, dv) tensor, so the chunk_size memory bound is broken although every output is right.
STAGE: memory (the per-position cumulative state when chunk_size is given)
"""
import torch
import torch.nn.functional as F


def elu_feature_map(x):
    return F.elu(x) + 1


def _compute_dtype(t):
    return torch.float32 if t.dtype in (torch.float16, torch.bfloat16) else t.dtype


def linear_attention_step(q_t, k_t, v_t, state=None):
    dtype = q_t.dtype
    cdt = _compute_dtype(q_t)
    Q = elu_feature_map(q_t.to(cdt))
    K = elu_feature_map(k_t.to(cdt))
    kv = torch.einsum("bhd,bhe->bhde", K, v_t.to(cdt))
    if state is None:
        S, z = kv, K
    else:
        S = state[0].to(cdt) + kv
        z = state[1].to(cdt) + K
    out = torch.einsum("bhd,bhde->bhe", Q, S) / torch.einsum("bhd,bhd->bh", Q, z)[..., None]
    return out.to(dtype), (S.to(dtype), z.to(dtype))


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be None or an int >= 1, got {chunk_size!r}")
    dtype = queries.dtype
    cdt = _compute_dtype(queries)
    Q = elu_feature_map(queries.to(cdt))
    K = elu_feature_map(keys.to(cdt))
    V = values.to(cdt)
    N, H, L, E = Q.shape
    M = V.shape[-1]

    KV = torch.einsum("nhsd,nhsm->nhsdm", K, V).cumsum(dim=2)  # (N, H, L, E, M)
    Z = K.cumsum(dim=2)
    if chunk_size is None:
        num = torch.einsum("nhld,nhldm->nhlm", Q, KV)
        den = torch.einsum("nhld,nhld->nhl", Q, Z)
        return (num / den.unsqueeze(-1)).to(dtype)

    outs = []
    for start in range(0, L, chunk_size):
        end = min(start + chunk_size, L)
        q_c, k_c, v_c = Q[:, :, start:end], K[:, :, start:end], V[:, :, start:end]
        if start == 0:
            S = Q.new_zeros(N, H, E, M)
            z = Q.new_zeros(N, H, E)
        else:
            S = KV[:, :, start - 1]
            z = Z[:, :, start - 1]
        A = torch.tril(q_c @ k_c.transpose(-1, -2))
        num = q_c @ S + A @ v_c
        den = (q_c @ z.unsqueeze(-1)).squeeze(-1) + A.sum(-1)
        outs.append(num / den.unsqueeze(-1))
    return torch.cat(outs, dim=2).to(dtype)
