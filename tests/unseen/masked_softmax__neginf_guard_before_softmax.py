"""BUG: none
STYLE: -inf fill handled carefully: rows with no valid key get finite dummy scores *before* the softmax (so neither forward nor backward sees NaN), softmax accumulated in float32 for half inputs, masked keys zeroed afterwards.
"""
import torch


def _key_mask(valid_lens, num_queries, num_keys, device):
    if valid_lens.dim() == 1:
        lens = valid_lens[:, None, None]            # same length for every query of the row
    else:
        lens = valid_lens[:, :, None]               # one length per query
    positions = torch.arange(num_keys, device=device)[None, None, :]
    return positions < lens                         # (B, Tq or 1, Tk)


def masked_softmax(scores, valid_lens=None):
    compute_dtype = torch.float32 if scores.dtype in (torch.float16, torch.bfloat16) else scores.dtype
    if valid_lens is None:
        return torch.softmax(scores, dim=-1, dtype=compute_dtype).to(scores.dtype)

    mask = _key_mask(valid_lens, scores.size(1), scores.size(-1), scores.device)
    mask = mask.expand(scores.shape)
    has_key = mask.any(dim=-1, keepdim=True)

    logits = scores.masked_fill(~mask, float("-inf"))
    # softmax of an all -inf row is NaN (and so is its gradient): give such rows zeros instead
    logits = torch.where(has_key, logits, torch.zeros_like(logits))
    probs = torch.softmax(logits, dim=-1, dtype=compute_dtype)
    probs = probs.masked_fill(~mask, 0.0)
    return probs.to(scores.dtype)
