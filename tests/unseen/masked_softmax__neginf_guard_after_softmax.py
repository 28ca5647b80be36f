"""BUG: an additive float mask of -inf (nn.Transformer style) is added to the scores and the NaNs of rows with no valid key are only cleaned up on the output, so the forward is right but the backward through an all -inf softmax row is NaN, and that NaN flows straight back into scores.
STAGE: the softmax
"""
import torch
import torch.nn.functional as F


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    Tk = scores.shape[-1]
    if valid_lens.dim() == 1:
        valid_lens = valid_lens.unsqueeze(-1).unsqueeze(-1)
    else:
        valid_lens = valid_lens.unsqueeze(-1)
    keep = torch.arange(Tk, device=scores.device) < valid_lens
    # float mask: 0.0 where attending is allowed, -inf where it is not
    attn_mask = torch.zeros(keep.shape, dtype=scores.dtype, device=scores.device)
    attn_mask = attn_mask.masked_fill(~keep, float("-inf"))
    weights = F.softmax(scores + attn_mask, dim=-1)
    # rows with valid_len == 0 are NaN: replace them by zeros
    return torch.nan_to_num(weights, nan=0.0)
