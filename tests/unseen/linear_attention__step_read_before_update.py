"""BUG: linear_attention_step reads out_t from the old sums and only then adds the new token (RNN "read, then write" order), so the token never sees itself and the first step from None divides 0 by 0.
STAGE: the state update order in the step
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
    v = v_t.to(cd)
    B, H, d = fq.shape
    if state is None:
        S = fq.new_zeros(B, H, d, v.shape[-1])
        z = fq.new_zeros(B, H, d)
    else:
        S, z = state[0].to(cd), state[1].to(cd)
    out = torch.einsum("bhd,bhde->bhe", fq, S) / torch.einsum("bhd,bhd->bh", fq, z).unsqueeze(-1)
    S = S + torch.einsum("bhd,bhe->bhde", fk, v)
    z = z + fk
    return out.to(q_t.dtype), (S.to(q_t.dtype), z.to(q_t.dtype))


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
            raise ValueError("chunk_size must be an int")
        if chunk_size < 1:
            raise ValueError("chunk_size must be >= 1")
    cd = _cd(queries.dtype)
    fq = feature_map(queries.to(cd))
    fk = feature_map(keys.to(cd))
    v = values.to(cd)
    B, H, T, d = fq.shape
    dv = v.shape[-1]
    C = T if chunk_size is None else chunk_size
    state = fq.new_zeros(B, H, d, dv + 1)  # [S | z]
    outs = []
    for s in range(0, T, max(C, 1)):
        e = min(s + C, T)
        qc, kc = fq[:, :, s:e], fk[:, :, s:e]
        vc = torch.cat([v[:, :, s:e], v.new_ones(B, H, e - s, 1)], dim=-1)
        scores = torch.einsum("bhid,bhjd->bhij", qc, kc).tril()
        res = torch.einsum("bhij,bhje->bhie", scores, vc) + torch.einsum("bhid,bhde->bhie", qc, state)
        outs.append(res[..., :dv] / res[..., dv:])
        state = state + torch.einsum("bhjd,bhje->bhde", kc, vc)
    return torch.cat(outs, dim=2).to(queries.dtype)
