"""fast-transformers style: with no chunk size, cumulative sums over the positions (allowed then); with one, a running
state and the masked products inside each chunk."""
import torch
import torch.nn.functional as F


def linear_attention_step(q_t, k_t, v_t, state=None):
    q, k = F.elu(q_t) + 1.0, F.elu(k_t) + 1.0
    if state is None:
        S = torch.zeros(*k.shape, v_t.shape[-1], dtype=v_t.dtype, device=v_t.device)
        z = torch.zeros_like(k)
    else:
        S, z = state
    S = S + k.unsqueeze(-1) * v_t.unsqueeze(-2)
    z = z + k
    return (q.unsqueeze(-2) @ S).squeeze(-2) / (q * z).sum(-1, keepdim=True), (S, z)


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError("chunk_size: None or an int >= 1")
    q, k = F.elu(queries) + 1.0, F.elu(keys) + 1.0
    if chunk_size is None:  # fast-transformers' causal product, spelled with cumsum
        S = torch.cumsum(k.unsqueeze(-1) * values.unsqueeze(-2), dim=2)  # (B, H, T, d, dv)
        z = torch.cumsum(k, dim=2)
        return (q.unsqueeze(-2) @ S).squeeze(-2) / (q * z).sum(-1, keepdim=True)
    B, H, T, d = q.shape
    S = values.new_zeros(B, H, d, values.shape[-1])
    z = keys.new_zeros(B, H, d)
    pieces = []
    for c0 in range(0, T, chunk_size):
        qc, kc, vc = q[:, :, c0:c0 + chunk_size], k[:, :, c0:c0 + chunk_size], values[:, :, c0:c0 + chunk_size]
        n = qc.shape[2]
        mask = torch.tril(torch.ones(n, n, dtype=qc.dtype, device=qc.device))
        a = (qc @ kc.transpose(-1, -2)) * mask
        pieces.append((qc @ S + a @ vc) / (qc @ z.unsqueeze(-1) + a.sum(-1, keepdim=True)))
        S = S + kc.transpose(-1, -2) @ vc
        z = z + kc.sum(2)
    return torch.cat(pieces, dim=2)
