"""BUG: linear_attention_step computes out_t from the state it was given and only then adds the new token (output before update): from state=None it divides 0 by 0 (NaN), later steps miss the j = t term; the chunked function is right. Differs in linear_attention_step on every input.
STAGE: the step's output (S, z used before the update)
STYLE: RNN-style decoding loop (RWKV / RetNet recurrent port)
"""
import torch
import torch.nn.functional as F


def _phi(x):
    return F.elu(x) + 1.0


def linear_attention_step(q_t, k_t, v_t, state=None):
    B, H, d = q_t.shape
    dv = v_t.shape[-1]
    if state is None:
        S = torch.zeros(B, H, d, dv, dtype=q_t.dtype, device=q_t.device)
        z = torch.zeros(B, H, d, dtype=q_t.dtype, device=q_t.device)
    else:
        S, z = state
    fk = _phi(k_t)
    fq = _phi(q_t)
    num = (fq.unsqueeze(-2) @ S).squeeze(-2)
    den = (fq * z).sum(-1, keepdim=True)
    S = S + fk.unsqueeze(-1) * v_t.unsqueeze(-2)
    z = z + fk
    return num / den, (S, z)


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError("chunk_size must be None or an int >= 1")
    BT = chunk_size if chunk_size is not None else 64
    B, H, T, K = queries.shape
    V = values.shape[-1]
    q, k = _phi(queries), _phi(keys)
    v = values
    h = q.new_zeros(B, H, K, V)
    z = q.new_zeros(B, H, K)
    causal = torch.ones(BT, BT, dtype=torch.bool, device=q.device).tril()
    o = []
    for i in range(0, T, BT):
        j = min(i + BT, T)
        b_q, b_k, b_v = q[:, :, i:j], k[:, :, i:j], v[:, :, i:j]
        n = j - i
        A = (b_q @ b_k.transpose(-1, -2)).masked_fill(~causal[:n, :n], 0)
        num = b_q @ h + A @ b_v
        den = (b_q @ z.unsqueeze(-1)) + A.sum(-1, keepdim=True)
        o.append(num / den)
        h = h + b_k.transpose(-1, -2) @ b_v
        z = z + b_k.sum(-2)
    return torch.cat(o, dim=2)
