"""BUG: none
STYLE: explicit per-chunk loop with the running state written in einsum (as in chunked
"linear transformer" tutorials); chunk_size None is the same loop with one chunk of T
positions, i.e. the masked (T, T) parallel form.
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
    S_new = S_prev + k[..., :, None] * v[..., None, :]
    z_new = z_prev + k
    num = torch.einsum("bhd,bhde->bhe", q, S_new)
    den = torch.einsum("bhd,bhd->bh", q, z_new)
    out = num / den[..., None]
    return out.to(q_t.dtype), (S_new.to(q_t.dtype), z_new.to(q_t.dtype))


def causal_linear_attention(queries, keys, values, chunk_size=None):
    T = queries.shape[-2]
    if chunk_size is None:
        C = max(T, 1)
    else:
        if type(chunk_size) is not int or chunk_size < 1:
            raise ValueError("chunk_size must be a positive int or None")
        C = chunk_size
    wd = _work_dtype(queries.dtype)
    q = _phi(queries.to(wd))
    k = _phi(keys.to(wd))
    v = values.to(wd)
    B, H, _, d = q.shape
    dv = v.shape[-1]

    state_kv = q.new_zeros(B, H, d, dv)
    state_k = q.new_zeros(B, H, d)
    pieces = []
    for s in range(0, T, C):
        qc, kc, vc = q[:, :, s:s + C], k[:, :, s:s + C], v[:, :, s:s + C]
        n = qc.shape[2]
        mask = torch.tril(torch.ones(n, n, device=q.device, dtype=wd))
        scores = torch.einsum("bhid,bhjd->bhij", qc, kc) * mask
        inter_num = torch.einsum("bhid,bhde->bhie", qc, state_kv)
        intra_num = torch.einsum("bhij,bhje->bhie", scores, vc)
        inter_den = torch.einsum("bhid,bhd->bhi", qc, state_k)
        intra_den = scores.sum(dim=-1)
        pieces.append((inter_num + intra_num) / (inter_den + intra_den)[..., None])
        state_kv = state_kv + torch.einsum("bhjd,bhje->bhde", kc, vc)
        state_k = state_k + kc.sum(dim=2)
    return torch.cat(pieces, dim=2).to(queries.dtype)
