"""BUG: BERT's additive -10000 mask: masked keys keep weight where valid scores sit near -1e4
STYLE: BERT's extended attention mask
"""
import torch
import torch.nn.functional as F


def masked_softmax(scores, valid_lens=None):
    B, Tq, Tk = scores.shape
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens.unsqueeze(1)
    attention_mask = (torch.arange(Tk, device=scores.device) < valid_lens.unsqueeze(-1)).to(scores.dtype)
    # original BERT: extended_attention_mask = (1.0 - attention_mask) * -10000.0
    extended_attention_mask = (1.0 - attention_mask) * -10000.0
    probs = F.softmax(scores + extended_attention_mask, dim=-1)
    return probs * attention_mask
