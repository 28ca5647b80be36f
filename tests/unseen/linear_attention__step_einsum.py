"""BUG: none
STYLE: recurrent (RNN) view first: the step builds phi(k) v^T with torch.einsum('bhd,bhe->bhde');
chunk_size None steps over t; with a chunk_size each chunk is done in parallel with a column of
ones appended to the chunk's values so numerator and denominator come out of one matmul.
"""
import torch
import torch.nn.functional as F


def feature_map(x):
    return F.elu(x) + 1


def _cd(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def linear_attention_step(q_t, k_t, v_t, state=None):
    cd = _cd(q_t.dtype)
    fq = feature_map(q_t.to(cd))
    fk = feature_map(k_t.to(cd))
    kv = torch.einsum("bhd,bhe->bhde", fk, v_t.to(cd))
    if state is None:
        S, z = kv, fk
    else:
        S_old, z_old = state
        S = torch.add(S_old.to(cd), kv)
        z = torch.add(z_old.to(cd), fk)
    out = torch.einsum("bhd,bhde->bhe", fq, S) / torch.einsum("bhd,bhd->bh", fq, z).unsqueeze(-1)
    return out.to(q_t.dtype), (S.to(q_t.dtype), z.to(q_t.dtype))


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
            raise ValueError("chunk_size must be an int")
        if chunk_size < 1:
            raise ValueError("chunk_size must be >= 1")
    T = queries.shape[2]
    cd = _cd(queries.dtype)
    if chunk_size is None:
        q, k, v = queries.to(cd), keys.to(cd), values.to(cd)
        state = None
        outs = []
        for t in range(T):
            o, state = linear_attention_step(q[:, :, t], k[:, :, t], v[:, :, t], state)
            outs.append(o)
        return torch.stack(outs, dim=2).to(queries.dtype)

    fq = feature_map(queries.to(cd))
    fk = feature_map(keys.to(cd))
    v = values.to(cd)
    B, H, _, d = fq.shape
    dv = v.shape[-1]
    state = fq.new_zeros(B, H, d, dv + 1)  # [S | z]
    outs = []
    for s in range(0, T, chunk_size):
        e = min(s + chunk_size, T)
        qc, kc = fq[:, :, s:e], fk[:, :, s:e]
        vc = torch.cat([v[:, :, s:e], v.new_ones(B, H, e - s, 1)], dim=-1)
        scores = torch.einsum("bhid,bhjd->bhij", qc, kc).tril()
        res = torch.einsum("bhij,bhje->bhie", scores, vc) + torch.einsum("bhid,bhde->bhie", qc, state)
        outs.append(res[..., :dv] / res[..., dv:])
        state = state + torch.einsum("bhjd,bhje->bhde", kc, vc)
    return torch.cat(outs, dim=2).to(queries.dtype)
