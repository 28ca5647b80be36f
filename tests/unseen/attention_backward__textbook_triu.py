"""STYLE: textbook pseudo-code (Jurafsky & Martin style: alpha = softmax(score), causal mask as an upper-triangular -inf matrix)
BUG: The causal mask is torch.triu(..., diagonal=1) on the (Tq, Tk) scores, aligned to the top left, instead of allowing j <= i + (Tk - Tq).
STAGE: D
WHEN: is_causal=True with Tq != Tk (Tq == Tk and non-causal are right).
"""
import math

import torch


def causal_mask(n_queries, n_keys, dtype, device):
    # mask out the upper triangle: query i cannot look at keys after position i
    return torch.triu(torch.full((n_queries, n_keys), float("-inf"), dtype=dtype, device=device), diagonal=1)


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    d_k = queries.shape[-1]
    dtype = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    Q, K, V, dA = (t.to(dtype) for t in (queries, keys, values, grad_output))
    # forward: score(x_i, x_j) = q_i . k_j / sqrt(d_k); alpha_ij = softmax_j(score); a_i = sum_j alpha_ij v_j
    score = Q @ K.transpose(-2, -1) / math.sqrt(d_k)
    if is_causal:
        score = score + causal_mask(Q.shape[-2], K.shape[-2], dtype, Q.device)
    alpha = torch.softmax(score, dim=-1)
    a = alpha @ V
    # backward
    d_alpha = dA @ V.transpose(-2, -1)  # dL/d alpha_ij = dA_i . v_j
    D = (dA * a).sum(-1, keepdim=True)  # sum_j alpha_ij dL/d alpha_ij
    d_score = alpha * (d_alpha - D)  # softmax Jacobian
    dQ = d_score @ K / math.sqrt(d_k)
    dK = d_score.transpose(-2, -1) @ Q / math.sqrt(d_k)
    dV = alpha.transpose(-2, -1) @ dA
    return dQ.to(queries.dtype), dK.to(keys.dtype), dV.to(values.dtype)
