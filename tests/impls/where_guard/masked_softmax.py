"""-inf fill, then torch.where guards: zero where masked, zero on rows with no valid key."""
import torch


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(scores.shape[-1], device=scores.device) < lens[..., None]
    safe = torch.where(keep.any(-1, keepdim=True), torch.where(keep, scores, -torch.inf), torch.zeros_like(scores))
    return torch.where(keep, torch.softmax(safe, dim=-1), torch.zeros_like(scores))
