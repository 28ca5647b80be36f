"""BUG: none
STYLE: Katharopoulos et al. "fast_transformers" CausalLinearAttention recurrent form in a Python loop, float64 running state, phi via torch.where(x > 0, x + 1, exp(min(x, 0)))
"""
import torch


def _feature_map(x):
    return torch.where(x > 0, x + 1, x.clamp(max=0).exp())


def linear_attention_step(q_t, k_t, v_t, state=None):
    wide = torch.float64 if q_t.dtype == torch.float64 else torch.float32
    if state is None:
        S = torch.zeros(q_t.shape + v_t.shape[-1:], dtype=wide, device=q_t.device)
        z = torch.zeros(q_t.shape, dtype=wide, device=q_t.device)
    else:
        S, z = state[0].to(wide), state[1].to(wide)
    Kt = _feature_map(k_t.to(wide))
    Qt = _feature_map(q_t.to(wide))
    S = S + torch.einsum("bhd,bhm->bhdm", Kt, v_t.to(wide))
    z = z + Kt
    out = torch.einsum("bhd,bhdm->bhm", Qt, S) / torch.einsum("bhd,bhd->bh", Qt, z).unsqueeze(-1)
    return out.to(q_t.dtype), (S.to(q_t.dtype), z.to(q_t.dtype))


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None and (type(chunk_size) is not int or chunk_size < 1):
        raise ValueError("chunk_size must be a positive int")
    B, H, T, d = queries.shape
    dv = values.shape[-1]
    wide = torch.float64
    S = torch.zeros(B, H, d, dv, dtype=wide, device=queries.device)
    z = torch.zeros(B, H, d, dtype=wide, device=queries.device)
    C = chunk_size or T or 1
    outs = []
    for c0 in range(0, T, C):
        for t in range(c0, min(c0 + C, T)):
            Kt = _feature_map(keys[:, :, t].to(wide))
            Qt = _feature_map(queries[:, :, t].to(wide))
            S = S + Kt.unsqueeze(-1) * values[:, :, t].to(wide).unsqueeze(-2)
            z = z + Kt
            num = (Qt.unsqueeze(-1) * S).sum(-2)
            den = (Qt * z).sum(-1, keepdim=True)
            outs.append((num / den).to(queries.dtype))
    if not outs:
        return queries.new_zeros(B, H, 0, dv)
    return torch.stack(outs, dim=2)
