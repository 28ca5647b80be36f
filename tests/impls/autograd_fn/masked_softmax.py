"""masked softmax as a custom torch.autograd.Function with a hand-written backward."""
import torch


class _MaskedSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores, keep):
        filled = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
        w = torch.softmax(filled, dim=-1) * keep
        ctx.save_for_backward(w)
        return w

    @staticmethod
    def backward(ctx, grad):
        (w,) = ctx.saved_tensors
        return w * (grad - (grad * w).sum(-1, keepdim=True)), None


def masked_softmax(scores, valid_lens=None):
    B, Tq, Tk = scores.shape
    if valid_lens is None:
        keep = torch.ones(B, Tq, Tk, dtype=torch.bool, device=scores.device)
    else:
        lens = valid_lens.reshape(B, -1, 1)  # (B, 1 or Tq, 1)
        keep = (torch.arange(Tk, device=scores.device) < lens).expand(B, Tq, Tk)
    return _MaskedSoftmax.apply(scores, keep)
