"""BUG: BERT-style additive mask of -10000 on padded keys; that is not "minus infinity" for scores of magnitude 1e4, so padded keys can take most of the weight (rows without keys are still zeroed).
STAGE: the mask
"""
import torch
import torch.nn.functional as F


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    B, Tq, Tk = scores.shape
    if valid_lens.dim() == 1:
        valid_lens = valid_lens.view(B, 1).expand(B, Tq)
    attention_mask = (torch.arange(Tk, device=scores.device).view(1, 1, Tk)
                      < valid_lens.view(B, Tq, 1)).to(scores.dtype)
    extended_mask = (1.0 - attention_mask) * -10000.0
    probs = F.softmax(scores + extended_mask, dim=-1)
    has_key = (valid_lens > 0).to(probs.dtype).unsqueeze(-1)
    return probs * has_key
