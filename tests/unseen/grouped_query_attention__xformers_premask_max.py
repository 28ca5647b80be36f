"""STYLE: xformers-style reference attention (ref_attention helpers, manual exp-normalise softmax, mask multiplied in)
BUG: The row max is taken over all keys before masking, so when masked keys score far above the allowed ones every allowed exp underflows and the row collapses to zeros.
STAGE: weights
WHEN: A mask that hides keys scoring more than ~100 (float32) or ~745 (float64) above every allowed key of a row, e.g. scores of magnitude 1e3-1e4.
"""
import torch


def _fold_groups(q, num_kv_heads):
    B, Hq, Tq, d = q.shape
    return q.reshape(B, num_kv_heads, (Hq // num_kv_heads) * Tq, d)


def _softmax_with_mask(scores, mask):
    row_max = scores.amax(dim=-1, keepdim=True)
    p = torch.exp(scores - row_max)
    if mask is not None:
        p = p * mask
    denom = p.sum(dim=-1, keepdim=True)
    return p / torch.where(denom > 0, denom, torch.ones_like(denom))


def grouped_query_attention(queries, keys, values, mask=None):
    B, Hq, Tq, d = queries.shape
    Hkv, Tk = keys.shape[1], keys.shape[2]
    if Hq % Hkv:
        raise ValueError(f"Hq={Hq} is not divisible by Hkv={Hkv}")
    q = _fold_groups(queries, Hkv)  # (B, Hkv, G*Tq, d)
    attn = q @ keys.transpose(-2, -1)
    attn = (attn * (1.0 / d ** 0.5)).view(B, Hq, Tq, Tk)
    attn = _softmax_with_mask(attn, mask)
    out = attn.reshape(B, Hkv, -1, Tk) @ values
    return out.reshape(B, Hq, Tq, values.shape[-1]), attn
