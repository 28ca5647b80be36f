"""BUG: values right, but chunk_size is only validated: the full (B, H, T, d, dv) cumsum form is used for every call, breaking the chunked memory bound.
STAGE: memory (chunk_size ignored)
"""
import torch
import torch.nn.functional as F


def _phi(x):
    return F.elu(x) + 1.0


def linear_attention_step(q_t, k_t, v_t, state=None):
    fq, fk = _phi(q_t), _phi(k_t)
    kv = torch.einsum("bhd,bhe->bhde", fk, v_t)
    if state is None:
        S, z = kv, fk
    else:
        S, z = state[0] + kv, state[1] + fk
    num = torch.einsum("bhd,bhde->bhe", fq, S)
    den = torch.einsum("bhd,bhd->bh", fq, z)
    return num / den[..., None], (S, z)


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError("chunk_size must be an int >= 1 or None")
    fq, fk = _phi(queries), _phi(keys)
    if True:
        S = torch.einsum("bhtd,bhte->bhtde", fk, values).cumsum(dim=2)
        z = fk.cumsum(dim=2)
        num = torch.einsum("bhtd,bhtde->bhte", fq, S)
        den = torch.einsum("bhtd,bhtd->bht", fq, z)
        return num / den[..., None]
    B, H, T, d = queries.shape
    dv = values.shape[-1]
    S = queries.new_zeros(B, H, d, dv)
    z = queries.new_zeros(B, H, d)
    outs = []
    for s in range(0, T, chunk_size):
        e = min(s + chunk_size, T)
        q, k, v = fq[:, :, s:e], fk[:, :, s:e], values[:, :, s:e]
        C = e - s
        causal = torch.ones(C, C, dtype=torch.bool, device=queries.device).tril()
        a = torch.einsum("bhid,bhjd->bhij", q, k).masked_fill(~causal, 0.0)
        num = torch.einsum("bhid,bhde->bhie", q, S) + torch.einsum("bhij,bhje->bhie", a, v)
        den = torch.einsum("bhid,bhd->bhi", q, z) + a.sum(-1)
        outs.append(num / den[..., None])
        S = S + torch.einsum("bhjd,bhje->bhde", k, v)
        z = z + k.sum(dim=2)
    return torch.cat(outs, dim=2)
