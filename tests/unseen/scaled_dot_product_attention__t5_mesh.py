"""STYLE: T5 / mesh-tensorflow attention (einsum scores, additive mask bias of finfo.min, softmax in float then type_as)
BUG: The scores are not divided by sqrt(d) (T5 folds the scale into its weight initialisation, the contract does not).
STAGE: scaled scores
WHEN: Always, for d > 1.
"""
import torch
import torch.nn.functional as F


def _mask_to_bias(mask, dtype, device):
    bias = torch.zeros(mask.shape, dtype=dtype, device=device)
    return bias.masked_fill(~mask, torch.finfo(dtype).min)


def scaled_dot_product_attention(queries, keys, values, mask=None):
    # "...qd,...kd->...qk": compatible with 2-D, 3-D and 4-D inputs
    scores = torch.einsum("...qd,...kd->...qk", queries, keys)
    if mask is not None:
        position_bias = _mask_to_bias(mask, scores.dtype, scores.device)
        scores = scores + position_bias
    attn_weights = F.softmax(scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores,
                             dim=-1).type_as(scores)
    if mask is not None:
        attn_weights = attn_weights.masked_fill(~mask, 0.0)
    attn_output = torch.einsum("...qk,...kv->...qv", attn_weights, values)
    return attn_output, attn_weights
