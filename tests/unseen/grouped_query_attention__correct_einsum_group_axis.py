"""STYLE: einsum over an explicit (kv head, group) split, additive float bias mask (Mistral/xformers inference style)
BUG: none
STAGE: none
WHEN: never
"""
import torch


def grouped_query_attention(queries, keys, values, mask=None):
    B, Hq, Tq, d = queries.shape
    Hkv = keys.shape[1]
    if Hq % Hkv:
        raise ValueError(f"grouped_query_attention: {Hq} query heads cannot be split into {Hkv} kv groups")
    G = Hq // Hkv
    Tk, dv = keys.shape[2], values.shape[3]

    q = queries.view(B, Hkv, G, Tq, d)
    logits = torch.einsum("bhgqd,bhkd->bhgqk", q, keys) * (1.0 / d ** 0.5)
    logits = logits.reshape(B, Hq, Tq, Tk)

    if mask is None:
        probs = logits.softmax(dim=-1)
    else:
        lowest = torch.finfo(logits.dtype).min
        logits = torch.where(mask, logits, torch.tensor(lowest, dtype=logits.dtype, device=logits.device))
        probs = logits.softmax(dim=-1)
        probs = torch.where(mask, probs, torch.zeros((), dtype=probs.dtype, device=probs.device))

    out = torch.einsum("bhgqk,bhkd->bhgqd", probs.view(B, Hkv, G, Tq, Tk), values)
    return out.reshape(B, Hq, Tq, dv), probs
