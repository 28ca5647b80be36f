"""torch.cumsum within each chunk (every position's own sum, chunk_size * d * dv numbers per head: memory that grows
with the chunk, not T), the running state carried across chunks; chunk_size None: one chunk of all T."""
import torch
import torch.nn.functional as F


def linear_attention_step(q_t, k_t, v_t, state=None):
    out, (S, z) = _chunk(q_t[:, :, None], k_t[:, :, None], v_t[:, :, None], state)
    return out[:, :, 0], (S, z)


def _chunk(q, k, v, state):
    """q, k, v (B, H, n, *): phi applied here; state None or (S, z) of the earlier tokens."""
    fq, fk = F.elu(q) + 1, F.elu(k) + 1
    sums = torch.cumsum(fk[..., :, None] * v[..., None, :], dim=2)  # (B, H, n, d, dv)
    norms = torch.cumsum(fk, dim=2)  # (B, H, n, d)
    if state is not None:
        sums = sums + state[0][:, :, None]
        norms = norms + state[1][:, :, None]
    out = (fq[..., None, :] @ sums).squeeze(-2) / (fq * norms).sum(-1, keepdim=True)
    return out, (sums[:, :, -1], norms[:, :, -1])


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"chunk_size must be None or a positive int, got {chunk_size!r}")
    T = queries.shape[2]
    C = chunk_size or max(T, 1)
    state, outs = None, []
    for t0 in range(0, T, C):
        out, state = _chunk(queries[:, :, t0:t0 + C], keys[:, :, t0:t0 + C], values[:, :, t0:t0 + C], state)
        outs.append(out)
    return torch.cat(outs, dim=2)
