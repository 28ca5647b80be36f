"""BUG: the argument check is `if not chunk_size:` (take the unchunked path) before `if chunk_size < 1: raise`, so chunk_size=0 (and False) is silently accepted as "no chunking" instead of raising ValueError.
STAGE: argument validation (chunk_size = 0)
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
        S = state[0].to(cd) + kv
        z = state[1].to(cd) + fk
    out = torch.einsum("bhd,bhde->bhe", fq, S) / torch.einsum("bhd,bhd->bh", fq, z).unsqueeze(-1)
    return out.to(q_t.dtype), (S.to(q_t.dtype), z.to(q_t.dtype))


def causal_linear_attention(queries, keys, values, chunk_size=None):
    cd = _cd(queries.dtype)
    fq = feature_map(queries.to(cd))
    fk = feature_map(keys.to(cd))
    v = values.to(cd)
    B, H, T, d = fq.shape
    dv = v.shape[-1]
    if not chunk_size:
        scores = torch.einsum("bhid,bhjd->bhij", fq, fk).tril()
        out = torch.einsum("bhij,bhje->bhie", scores, v) / scores.sum(-1, keepdim=True)
        return out.to(queries.dtype)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError("chunk_size must be a positive int")

    state = fq.new_zeros(B, H, d, dv)
    norm = fq.new_zeros(B, H, d)
    outs = []
    for s in range(0, T, chunk_size):
        e = min(s + chunk_size, T)
        qc, kc, vc = fq[:, :, s:e], fk[:, :, s:e], v[:, :, s:e]
        scores = torch.einsum("bhid,bhjd->bhij", qc, kc).tril()
        num = torch.einsum("bhij,bhje->bhie", scores, vc) + torch.einsum("bhid,bhde->bhie", qc, state)
        den = scores.sum(-1) + torch.einsum("bhid,bhd->bhi", qc, norm)
        outs.append(num / den.unsqueeze(-1))
        state = state + torch.einsum("bhjd,bhje->bhde", kc, vc)
        norm = norm + kc.sum(dim=2)
    return torch.cat(outs, dim=2).to(queries.dtype)
