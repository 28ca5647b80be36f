"""The softmax of scaled dot-product attention as a custom autograd Function."""
import torch


class _Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores, keep):
        w = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), dim=-1) * keep
        ctx.save_for_backward(w)
        return w

    @staticmethod
    def backward(ctx, grad):
        (w,) = ctx.saved_tensors
        return w * (grad - (grad * w).sum(-1, keepdim=True)), None


def scaled_dot_product_attention(queries, keys, values, mask=None):
    scores = queries @ keys.transpose(-2, -1) * queries.shape[-1] ** -0.5
    keep = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.expand_as(scores)
    weights = _Softmax.apply(scores, keep)
    return weights @ values, weights
