"""BUG: an epsilon (1e-6) is added to the normaliser (den + eps, as in fast_transformers' eps=1e-6); the contract forbids it; differs by ~1e-7 relative on any input, more where phi is small (features near -8).
STAGE: the normaliser
STYLE: idiap fast_transformers LinearAttention (Z = 1/(Q.K_sum + eps)) mixed with a chunked course solution
"""
import torch
import torch.nn.functional as F


def phi(x):
    return torch.nn.functional.elu(x, alpha=1.0) + 1


def linear_attention_step(q_t, k_t, v_t, state=None):
    fq, fk = phi(q_t), phi(k_t)
    kv = torch.einsum("bhd,bhe->bhde", fk, v_t)
    if state is None:
        S, z = kv, fk
    else:
        S, z = state[0] + kv, state[1] + fk
    out = torch.einsum("bhd,bhde->bhe", fq, S) / (torch.einsum("bhd,bhd->bh", fq, z)[..., None] + 1e-6)
    return out, (S, z)


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None and not (isinstance(chunk_size, int) and not isinstance(chunk_size, bool) and chunk_size >= 1):
        raise ValueError(f"bad chunk_size {chunk_size!r}")
    Q, K = phi(queries), phi(keys)
    T = queries.shape[-2]
    if chunk_size is None:
        A = torch.tril(Q @ K.transpose(-1, -2))
        return (A @ values) / (A.sum(-1, keepdim=True) + 1e-6)
    B, H, _, d = Q.shape
    dv = values.shape[-1]
    S = torch.zeros(B, H, d, dv, dtype=Q.dtype, device=Q.device)
    z = torch.zeros(B, H, d, dtype=Q.dtype, device=Q.device)
    out = torch.empty(B, H, T, dv, dtype=Q.dtype, device=Q.device)
    for s in range(0, T, chunk_size):
        e = min(s + chunk_size, T)
        q, k, v = Q[..., s:e, :], K[..., s:e, :], values[..., s:e, :]
        zc = z.unsqueeze(-2) + torch.cumsum(k, dim=-2)  # (B, H, n, d)
        den = (q * zc).sum(-1, keepdim=True)
        num = q @ S + torch.tril(q @ k.transpose(-1, -2)) @ v
        out[..., s:e, :] = num / (den + 1e-6)
        S = S + k.transpose(-1, -2) @ v
        z = z + k.sum(-2)
    return out
