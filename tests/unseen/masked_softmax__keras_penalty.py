"""BUG: none
STYLE: Keras Attention/AdditiveAttention _apply_scores (scores -= 1e9 * (1 - mask), then softmax), computed in float32 for half inputs and multiplied by the mask so empty rows are 0.
"""
import torch


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    B, Tq, Tk = scores.shape
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None].expand(B, Tq)
    # padding mask like keras: 1.0 for keep, 0.0 for pad
    padding_mask = (torch.arange(Tk, device=scores.device)[None, None, :]
                    < valid_lens[..., None])
    compute_dtype = torch.float32 if scores.dtype in (torch.float16, torch.bfloat16) else scores.dtype
    s = scores.to(compute_dtype)
    m = padding_mask.to(compute_dtype)
    s = s - 1.0e9 * (1.0 - m)
    weights = torch.softmax(s, dim=-1) * m
    return weights.to(scores.dtype)
