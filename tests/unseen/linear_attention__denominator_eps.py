"""BUG: fast-transformers' eps = 1e-6 in the denominator
STYLE: fast-transformers
"""
"""Causal linear attention ported from fast-transformers' CausalLinearAttention
(Katharopoulos et al.'s own code), which adds eps=1e-6 to the normaliser.

BUG: the contract forbids the epsilon: phi > 0 makes the denominator positive, and 1e-6 moves
the result by more than float64 tolerance (most visible where the denominator is small).
"""
import torch
import torch.nn.functional as F

EPS = 1e-6


def _feature_map(x):
    return F.elu(x) + 1


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int)
                                   or chunk_size < 1):
        raise ValueError("chunk_size must be a positive int")
    Q, K = _feature_map(queries), _feature_map(keys)
    T = Q.shape[2]
    C = T if chunk_size is None else chunk_size
    S = Q.new_zeros(*Q.shape[:2], Q.shape[-1], values.shape[-1])
    Zs = Q.new_zeros(*Q.shape[:2], Q.shape[-1])
    outs = []
    for s in range(0, T, C):
        q, k, v = Q[:, :, s:s + C], K[:, :, s:s + C], values[:, :, s:s + C]
        A = torch.einsum("nhld,nhsd->nhls", q, k).tril()
        Z = 1 / (torch.einsum("nhld,nhd->nhl", q, Zs) + A.sum(-1) + EPS)
        V = torch.einsum("nhld,nhdm->nhlm", q, S) + torch.einsum("nhls,nhsm->nhlm", A, v)
        outs.append(V * Z[..., None])
        S = S + torch.einsum("nhsd,nhsm->nhdm", k, v)
        Zs = Zs + k.sum(2)
    return torch.cat(outs, 2)


def linear_attention_step(q_t, k_t, v_t, state=None):
    q, k = _feature_map(q_t), _feature_map(k_t)
    kv = torch.einsum("nhd,nhm->nhdm", k, v_t)
    if state is None:
        S, z = kv, k
    else:
        S, z = state[0] + kv, state[1] + k
    Z = 1 / (torch.einsum("nhd,nhd->nh", q, z) + EPS)
    return torch.einsum("nhd,nhdm->nhm", q, S) * Z[..., None], (S, z)
