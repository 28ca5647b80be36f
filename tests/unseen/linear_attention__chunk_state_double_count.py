"""BUG: in the chunked loop the running (S, z) is updated with the current chunk before the chunk's inter-chunk term is read, and the masked intra-chunk term is added on top, so every chunk's own keys are counted twice (and future keys of the chunk leak in).
STAGE: the state update order in the chunk loop (chunk_size given only)
"""
import torch
import torch.nn.functional as F


def _phi(x):
    return F.elu(x, alpha=1.0) + 1.0


def _work_dtype(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def linear_attention_step(q_t, k_t, v_t, state=None):
    wd = _work_dtype(q_t.dtype)
    q = _phi(q_t.to(wd))
    k = _phi(k_t.to(wd))
    v = v_t.to(wd)
    B, H, d = q.shape
    dv = v.shape[-1]
    if state is None:
        S_prev = q.new_zeros(B, H, d, dv)
        z_prev = q.new_zeros(B, H, d)
    else:
        S_prev, z_prev = state[0].to(wd), state[1].to(wd)
    S_new = S_prev + torch.einsum("bhd,bhe->bhde", k, v)
    z_new = z_prev + k
    out = torch.einsum("bhd,bhde->bhe", q, S_new) / torch.einsum("bhd,bhd->bh", q, z_new)[..., None]
    return out.to(q_t.dtype), (S_new.to(q_t.dtype), z_new.to(q_t.dtype))


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None and (type(chunk_size) is not int or chunk_size < 1):
        raise ValueError("chunk_size must be a positive int or None")
    wd = _work_dtype(queries.dtype)
    q = _phi(queries.to(wd))
    k = _phi(keys.to(wd))
    v = values.to(wd)
    B, H, T, d = q.shape
    dv = v.shape[-1]

    if chunk_size is None:
        scores = torch.einsum("bhid,bhjd->bhij", q, k).tril()
        out = torch.einsum("bhij,bhje->bhie", scores, v) / scores.sum(-1, keepdim=True)
        return out.to(queries.dtype)

    state_kv = q.new_zeros(B, H, d, dv)
    state_k = q.new_zeros(B, H, d)
    pieces = []
    for s in range(0, T, chunk_size):
        qc, kc, vc = q[:, :, s:s + chunk_size], k[:, :, s:s + chunk_size], v[:, :, s:s + chunk_size]
        state_kv = state_kv + torch.einsum("bhjd,bhje->bhde", kc, vc)
        state_k = state_k + kc.sum(dim=2)
        scores = torch.einsum("bhid,bhjd->bhij", qc, kc).tril()
        num = torch.einsum("bhid,bhde->bhie", qc, state_kv) + torch.einsum("bhij,bhje->bhie", scores, vc)
        den = torch.einsum("bhid,bhd->bhi", qc, state_k) + scores.sum(dim=-1)
        pieces.append(num / den[..., None])
    return torch.cat(pieces, dim=2).to(queries.dtype)
