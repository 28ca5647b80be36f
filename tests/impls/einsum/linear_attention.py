"""Chunks with einsum; the whole (T, T) masked form when chunk_size is None; phi written with torch.where."""
import torch


def _phi(x):
    return torch.where(x > 0, x + 1, torch.exp(x))


def linear_attention_step(q_t, k_t, v_t, state=None):
    fq, fk = _phi(q_t), _phi(k_t)
    outer = torch.einsum("bhd,bhe->bhde", fk, v_t)
    S, z = (outer, fk) if state is None else (state[0] + outer, state[1] + fk)
    return torch.einsum("bhd,bhde->bhe", fq, S) / torch.einsum("bhd,bhd->bh", fq, z).unsqueeze(-1), (S, z)


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError("chunk_size must be a positive int")
    fq, fk = _phi(queries), _phi(keys)
    T = queries.shape[2]
    if chunk_size is None:
        a = torch.einsum("bhid,bhjd->bhij", fq, fk).tril()
        return torch.einsum("bhij,bhje->bhie", a, values) / a.sum(-1, keepdim=True)
    S = torch.zeros(*keys.shape[:2], keys.shape[-1], values.shape[-1], dtype=values.dtype, device=values.device)
    z = torch.zeros(*keys.shape[:2], keys.shape[-1], dtype=keys.dtype, device=keys.device)
    outs = []
    for s in range(0, T, chunk_size):
        q, k, v = fq[:, :, s:s + chunk_size], fk[:, :, s:s + chunk_size], values[:, :, s:s + chunk_size]
        a = torch.einsum("bhid,bhjd->bhij", q, k).tril()
        num = torch.einsum("bhid,bhde->bhie", q, S) + torch.einsum("bhij,bhje->bhie", a, v)
        den = torch.einsum("bhid,bhd->bhi", q, z) + a.sum(-1)
        outs.append(num / den.unsqueeze(-1))
        S = S + torch.einsum("bhjd,bhje->bhde", k, v)
        z = z + k.sum(2)
    return torch.cat(outs, dim=2)
