"""STYLE: written from the contract alone (CONTRACT-next.md section 14), never from the kit's reference
BUG: In local-p the scores are multiplied by the Gaussian before the masked softmax and no Gaussian is applied afterwards, so rows sum to 1 and the weights are not softmax-then-Gaussian.
"""
import torch
from torch import nn


def _lin(layer, x):
    """Apply a bias-free nn.Linear in the dtype/device of x."""
    return nn.functional.linear(x, layer.weight.to(x))


def masked_softmax(X, mask):
    """Softmax over the last axis keeping only entries where mask is True;
    rows with no True entry come out as all zeros."""
    X = X.masked_fill(~mask, -1e9)
    return nn.functional.softmax(X, dim=-1) * mask.to(X.dtype)


class LocalAttention(nn.Module):
    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError("window must be an int >= 1")
        if mode not in ("local-m", "local-p"):
            raise ValueError("mode must be 'local-m' or 'local-p'")
        if mode == "local-p" and align_dim is None:
            raise ValueError("local-p needs align_dim")
        self.window = window
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        batch_size, num_queries, _ = queries.shape
        num_keys = keys.shape[1]
        dtype = queries.dtype
        if valid_lens is None:
            lens = torch.full((batch_size, num_queries), num_keys, device=queries.device)
        elif valid_lens.dim() == 1:
            lens = torch.repeat_interleave(valid_lens.to(queries.device), num_queries).reshape(batch_size, num_queries)
        else:
            lens = valid_lens.to(queries.device)

        scores = torch.bmm(queries, _lin(self.W_a, keys).transpose(1, 2))

        if self.mode == "local-m":
            centre = torch.arange(num_queries, device=queries.device, dtype=dtype).repeat(batch_size, 1)
        else:
            centre = (lens.to(dtype) - 1) * torch.sigmoid(_lin(self.v_p, torch.tanh(_lin(self.W_p, queries)))).squeeze(-1)

        positions = torch.arange(num_keys, device=queries.device)
        distance = positions.to(dtype)[None, None, :] - centre[:, :, None]
        mask = (distance.abs() <= self.window) & (positions[None, None, :] < lens[:, :, None])

        if self.mode == "local-p":
            sigma = self.window / 2
            # favour positions near p_t before normalising
            scores = scores * torch.exp(-distance ** 2 / (2 * sigma ** 2))
        weights = masked_softmax(scores, mask)
        return torch.bmm(weights, values), weights
