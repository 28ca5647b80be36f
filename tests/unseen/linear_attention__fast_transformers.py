"""BUG: none
STYLE: fast-transformers (Katharopoulos et al.) style: elu_feature_map = F.elu(x) + 1; with
chunk_size None the cumulative sums of phi(k) v^T and phi(k) over T (allowed there); with a
chunk_size a loop over chunks carrying (S, z), the masked parallel form inside each chunk.
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
    V = v_t.to(cdt)
    kv = K.unsqueeze(-1) * V.unsqueeze(-2)  # (B, H, d, dv)
    if state is None:
        S, z = kv, K
    else:
        S = state[0].to(cdt) + kv
        z = state[1].to(cdt) + K
    num = (Q.unsqueeze(-2) @ S).squeeze(-2)
    den = (Q * z).sum(-1, keepdim=True)
    out = num / den
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

    if chunk_size is None:
        KV = torch.einsum("nhsd,nhsm->nhsdm", K, V).cumsum(dim=2)
        Z = K.cumsum(dim=2)
        num = torch.einsum("nhld,nhldm->nhlm", Q, KV)
        den = torch.einsum("nhld,nhld->nhl", Q, Z)
        return (num / den.unsqueeze(-1)).to(dtype)

    S = Q.new_zeros(N, H, E, M)
    z = Q.new_zeros(N, H, E)
    outs = []
    for start in range(0, L, chunk_size):
        end = min(start + chunk_size, L)
        q_c, k_c, v_c = Q[:, :, start:end], K[:, :, start:end], V[:, :, start:end]
        c = end - start
        A = q_c @ k_c.transpose(-1, -2)
        causal = torch.ones(c, c, dtype=torch.bool, device=Q.device).tril()
        A = A.masked_fill(~causal, 0.0)
        num = q_c @ S + A @ v_c
        den = (q_c @ z.unsqueeze(-1)).squeeze(-1) + A.sum(-1)
        outs.append(num / den.unsqueeze(-1))
        S = S + k_c.transpose(-1, -2) @ v_c
        z = z + k_c.sum(dim=2)
    return torch.cat(outs, dim=2).to(dtype)
