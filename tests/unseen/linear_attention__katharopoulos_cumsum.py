"""BUG: none
STYLE: the cumsum form for chunk_size=None (Katharopoulos), the state carried across chunks otherwise
"""
"""Causal linear attention of Katharopoulos et al. (2020), "Transformers are RNNs".

chunk_size=None: the paper's causal form with cumulative sums of phi(k) v^T (eq. 9-10).
chunk_size=C: a running state (S, z) carried across chunks, the masked parallel form inside a chunk.
"""
import torch
import torch.nn.functional as F


def _phi(x):
    return F.elu(x) + 1


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int)
                                   or chunk_size < 1):
        raise ValueError(f"chunk_size must be None or an int >= 1, got {chunk_size!r}")
    Q, K = _phi(queries), _phi(keys)
    if chunk_size is None:
        KV = torch.einsum("bhtd,bhte->bhtde", K, values).cumsum(dim=2)
        Z = K.cumsum(dim=2)
        num = torch.einsum("bhtd,bhtde->bhte", Q, KV)
        den = (Q * Z).sum(-1, keepdim=True)
        return num / den

    B, H, T, d = Q.shape
    dv = values.shape[-1]
    S = Q.new_zeros(B, H, d, dv)
    z = Q.new_zeros(B, H, d, 1)
    out = Q.new_empty(B, H, T, dv)
    for c0 in range(0, T, chunk_size):
        c1 = min(c0 + chunk_size, T)
        Qc, Kc, Vc = Q[:, :, c0:c1], K[:, :, c0:c1], values[:, :, c0:c1]
        A = (Qc @ Kc.transpose(-1, -2)).tril()
        num = Qc @ S + A @ Vc
        den = Qc @ z + A.sum(-1, keepdim=True)
        out[:, :, c0:c1] = num / den
        S = S + Kc.transpose(-1, -2) @ Vc
        z = z + Kc.sum(-2).unsqueeze(-1)
    return out


def linear_attention_step(q_t, k_t, v_t, state=None):
    phq, phk = _phi(q_t), _phi(k_t)
    kv = phk.unsqueeze(-1) * v_t.unsqueeze(-2)
    if state is None:
        S, z = kv, phk
    else:
        S, z = state[0] + kv, state[1] + phk
    out = torch.einsum("bhd,bhde->bhe", phq, S) / (phq * z).sum(-1, keepdim=True)
    return out, (S, z)
