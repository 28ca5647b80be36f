"""STYLE: FlashAttention-2 paper, Algorithm 2 (backward), transcribed with K_j/V_j outer loop and Q_i inner loop
BUG: dS is formed as the gradient of the unscaled scores (tau * P o (dP - D)) and dQ, dK are then multiplied by tau again, so the softmax scale is applied twice.
STAGE: dS
WHEN: Always, for d > 1 (dQ and dK are too small by a factor sqrt(d); dV is right).
"""
import math

import torch


def _forward_stats(Q, K, V, tau, causal, offset):
    S = tau * (Q @ K.transpose(-2, -1))
    if causal:
        Nq, Nk = S.shape[-2], S.shape[-1]
        keep = torch.ones(Nq, Nk, dtype=torch.bool, device=S.device).tril(offset)
        S = S.masked_fill(~keep, -math.inf)
    m = S.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    P = torch.exp(S - m)
    l = P.sum(-1, keepdim=True)
    O = P @ V / torch.where(l > 0, l, torch.ones_like(l))
    L = torch.where(l > 0, m + torch.log(torch.where(l > 0, l, torch.ones_like(l))), torch.full_like(l, -math.inf))
    return O, L.squeeze(-1)


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    N_q, d = queries.shape[-2:]
    N_k = keys.shape[-2]
    tau = 1.0 / math.sqrt(d)
    dt = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    Q, K, V, dO = (t.to(dt) for t in (queries, keys, values, grad_output))
    offset = N_k - N_q
    B_r = B_c = 32
    O, L = _forward_stats(Q, K, V, tau, is_causal, offset)
    # 4: compute D = rowsum(dO o O)
    D = (dO * O).sum(-1)
    dQ = torch.zeros_like(Q)
    dK = torch.zeros_like(K)
    dV = torch.zeros_like(V)
    L_safe = torch.where(torch.isinf(L), torch.zeros_like(L), L)
    # 5: for 1 <= j <= T_c do
    for j0 in range(0, N_k, B_c):
        K_j, V_j = K[..., j0:j0 + B_c, :], V[..., j0:j0 + B_c, :]
        dK_j = torch.zeros_like(K_j)
        dV_j = torch.zeros_like(V_j)
        # 8: for 1 <= i <= T_r do
        for i0 in range(0, N_q, B_r):
            Q_i, dO_i = Q[..., i0:i0 + B_r, :], dO[..., i0:i0 + B_r, :]
            L_i, D_i = L_safe[..., i0:i0 + B_r], D[..., i0:i0 + B_r]
            # 10: S_i^(j) = Q_i K_j^T (scaled)
            S_ij = tau * (Q_i @ K_j.transpose(-2, -1))
            if is_causal:
                r = torch.arange(i0, i0 + Q_i.shape[-2], device=Q.device)
                c = torch.arange(j0, j0 + K_j.shape[-2], device=Q.device)
                S_ij = S_ij.masked_fill(c[None, :] > r[:, None] + offset, -math.inf)
            # 11: P_i^(j) = exp(S_ij - L_i)
            P_ij = torch.exp(S_ij - L_i[..., None])
            # 12: dV_j <- dV_j + (P_i^(j))^T dO_i
            dV_j = dV_j + P_ij.transpose(-2, -1) @ dO_i
            # 13: dP_i^(j) = dO_i V_j^T
            dP_ij = dO_i @ V_j.transpose(-2, -1)
            # 14: dS_i^(j) = P_i^(j) o (dP_i^(j) - D_i)
            dS_ij = tau * P_ij * (dP_ij - D_i[..., None])
            # 15: dQ_i <- dQ_i + dS_i^(j) K_j
            dQ[..., i0:i0 + B_r, :] += tau * (dS_ij @ K_j)
            # 16: dK_j <- dK_j + dS_i^(j)^T Q_i
            dK_j = dK_j + tau * (dS_ij.transpose(-2, -1) @ Q_i)
        dK[..., j0:j0 + B_c, :] = dK_j
        dV[..., j0:j0 + B_c, :] = dV_j
    return dQ.to(queries.dtype), dK.to(keys.dtype), dV.to(values.dtype)
