"""BUG: K/V expanded with .repeat(1, G, 1, 1) (tiling) instead of consecutive groups, so query head n uses kv head n % Hkv instead of n // G; differs whenever 1 < Hkv < Hq. (It also copies K/V.)
STAGE: the scores (wrong key head per query head)
STYLE: early community Llama-2 ports using torch.tile / Tensor.repeat for repeat_kv
"""
import math
import torch


def grouped_query_attention(queries, keys, values, mask=None):
    B, Hq, Tq, d = queries.shape
    Hkv = keys.shape[1]
    if Hq % Hkv != 0:
        raise ValueError("Hq % Hkv != 0")
    n_rep = Hq // Hkv
    k = keys.repeat(1, n_rep, 1, 1)
    v = values.repeat(1, n_rep, 1, 1)
    scores = torch.matmul(queries, k.transpose(2, 3)) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
        live = torch.broadcast_to(mask, scores.shape).any(-1, keepdim=True)
        scores = scores.masked_fill(~live, 0.0)
        w = torch.softmax(scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores, dim=-1)
        w = w.to(queries.dtype).masked_fill(~live, 0.0)
    else:
        w = torch.softmax(scores, dim=-1)
    return torch.matmul(w, v), w
