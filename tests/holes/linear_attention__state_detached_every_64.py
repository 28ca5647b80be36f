"""Reference: causal linear attention (Katharopoulos et al. 2020), phi(x) = elu(x) + 1, in its chunked and recurrent
forms."""
import torch

SEGMENT = 64  # positions whose graph is kept together; the state between segments carries values only


def _phi(x):
    """The feature map elu(x) + 1 > 0 (alpha = 1)."""
    return torch.nn.functional.elu(x) + 1


def causal_linear_attention(queries, keys, values, chunk_size=None):
    """queries (B, H, T, d), keys (B, H, T, d), values (B, H, T, dv) -> output (B, H, T, dv).
    out_i = phi(q_i)^T S_i / (phi(q_i)^T z_i), S_i = sum_{j<=i} phi(k_j) v_j^T, z_i = sum_{j<=i} phi(k_j). Chunks of
    chunk_size positions (all T at once when None): the parallel form inside a chunk, the running (S, z) across."""
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"causal_linear_attention: chunk_size = {chunk_size!r} must be None or an int of at least 1")
    T, dv = queries.shape[-2], values.shape[-1]
    q, k = _phi(queries), _phi(keys)
    C = chunk_size or max(T, 1)
    S = values.new_zeros(*keys.shape[:-2], keys.shape[-1], dv)  # (B, H, d, dv): the sums over earlier chunks
    z = keys.new_zeros(*keys.shape[:-2], keys.shape[-1])  # (B, H, d)
    outs = []
    for t0 in range(0, T, C):
        qc, kc, vc = q[..., t0:t0 + C, :], k[..., t0:t0 + C, :], values[..., t0:t0 + C, :]  # the last may be partial
        n = qc.shape[-2]
        causal = torch.ones(n, n, dtype=torch.bool, device=queries.device).tril()
        a = (qc @ kc.transpose(-2, -1)) * causal  # (B, H, n, n): the chunk's own keys, j <= i
        num = qc @ S + a @ vc  # (B, H, n, dv)
        den = qc @ z[..., None] + a.sum(-1, keepdim=True)  # (B, H, n, 1), > 0: the j = i term alone is
        outs.append(num / den)
        S = S + kc.transpose(-2, -1) @ vc
        z = z + kc.sum(-2)
        if (t0 + n) // SEGMENT > t0 // SEGMENT:  # a new segment of SEGMENT positions starts: carry the state into it
            S, z = S.detach(), z.detach()  # without its graph (Transformer-XL's memory), so the graph stays short
    return torch.cat(outs, dim=-2)


def linear_attention_step(q_t, k_t, v_t, state=None):
    """q_t (B, H, d), k_t (B, H, d), v_t (B, H, dv), state None or (S (B, H, d, dv), z (B, H, d)) -> (out_t (B, H, dv),
    (S, z)): the new token added first (S += phi(k_t) v_t^T, z += phi(k_t)), then out_t = phi(q_t)^T S / phi(q_t)^T z."""
    q, k = _phi(q_t), _phi(k_t)
    if state is None:
        S = v_t.new_zeros(*k_t.shape, v_t.shape[-1])
        z = k_t.new_zeros(k_t.shape)
    else:
        S, z = state
    S = S + k[..., :, None] * v_t[..., None, :]  # new tensors: the given state is never modified
    z = z + k
    num = (q[..., None, :] @ S).squeeze(-2)  # (B, H, dv)
    den = (q * z).sum(-1, keepdim=True)  # (B, H, 1)
    return num / den, (S, z)
