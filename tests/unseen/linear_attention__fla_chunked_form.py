"""BUG: none
STYLE: flash-linear-attention's chunked form: intra-chunk masked products plus the state carried between chunks.
"""
import torch
import torch.nn.functional as F


def _phi(x):
    return F.elu(x) + 1


def linear_attention_step(q_t, k_t, v_t, state=None):
    qf, kf = _phi(q_t), _phi(k_t)
    kv = kf.unsqueeze(-1) * v_t.unsqueeze(-2)  # (B, H, d, dv)
    if state is None:
        S, z = kv, kf
    else:
        S, z = state[0] + kv, state[1] + kf
    num = torch.einsum("bhd,bhdv->bhv", qf, S)
    den = (qf * z).sum(-1, keepdim=True)
    return num / den, (S, z)


def causal_linear_attention(queries, keys, values, chunk_size=None):
    """flash-linear-attention style chunked form: intra-chunk masked products + carried state."""
    if chunk_size is not None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError("chunk_size must be an int >= 1")
    B, H, T, d = queries.shape
    dv = values.shape[-1]
    q, k = _phi(queries), _phi(keys)
    v = values
    if chunk_size is None:
        chunk_size = T if T > 0 else 1
    C = chunk_size
    S = q.new_zeros(B, H, d, dv)
    z = q.new_zeros(B, H, d)
    outs = []
    for i in range(0, T, C):
        qc, kc, vc = q[:, :, i:i + C], k[:, :, i:i + C], v[:, :, i:i + C]
        n = qc.shape[2]
        causal = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        A = (qc @ kc.transpose(-1, -2)).masked_fill(~causal, 0)
        num = A @ vc + qc @ S
        den = A.sum(-1, keepdim=True) + (qc @ z.unsqueeze(-1))
        outs.append(num / den)
        S = S + kc.transpose(-1, -2) @ vc
        z = z + kc.sum(2)
    return torch.cat(outs, dim=2)
