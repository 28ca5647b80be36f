"""STYLE: written from the contract alone (CONTRACT-next.md section 14), never from the kit's reference
BUG: The local-p aligned position is p_t = L * sigmoid(...) instead of (L - 1) * sigmoid(...), shifting the window and Gaussian and letting p_t exceed L-1.
"""
"""Local attention, toolkit style (predict-then-attend)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def _lin(layer, x):
    """Apply a bias-free nn.Linear in the dtype/device of x."""
    return nn.functional.linear(x, layer.weight.to(x))


class LocalAttention(nn.Module):
    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super(LocalAttention, self).__init__()
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise ValueError("window must be an integer >= 1")
        if mode != "local-m" and mode != "local-p":
            raise ValueError("attention mode should be 'local-m' or 'local-p', not %s" % mode)
        if mode == "local-p" and align_dim is None:
            raise ValueError("align_dim must be given for local-p")
        self.D = window
        self.window = window
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def _src_lengths(self, valid_lens, batch, tgt_len, src_len, device):
        if valid_lens is None:
            return torch.full((batch, tgt_len), src_len, dtype=torch.long, device=device)
        lengths = valid_lens.long().to(device)
        if lengths.dim() == 1:
            lengths = lengths.view(batch, 1).expand(batch, tgt_len)
        return lengths

    def forward(self, queries, keys, values, valid_lens=None):
        batch, tgt_len, _ = queries.size()
        src_len = keys.size(1)
        src_lengths = self._src_lengths(valid_lens, batch, tgt_len, src_len, queries.device)

        # general score: h_t^T W_a h_s
        energy = torch.bmm(queries, _lin(self.W_a, keys).transpose(1, 2))

        if self.mode == "local-p":
            # p_t = S * sigmoid(v_p^T tanh(W_p h_t)), S = source length
            S = src_lengths.to(queries.dtype)
            p_t = S * torch.sigmoid(_lin(self.v_p, torch.tanh(_lin(self.W_p, queries))).squeeze(-1))
        else:
            p_t = torch.arange(tgt_len, dtype=queries.dtype, device=queries.device).unsqueeze(0).expand(batch, tgt_len)

        s = torch.arange(src_len, device=queries.device)
        gap = s.to(queries.dtype).view(1, 1, -1) - p_t.unsqueeze(-1)
        valid = (gap.detach().abs() <= self.D) & (s.view(1, 1, -1) < src_lengths.unsqueeze(-1))

        energy = energy.masked_fill(~valid, float("-inf"))
        energy = torch.where(valid.any(-1, keepdim=True), energy, torch.zeros_like(energy))
        attn = F.softmax(energy, dim=-1).masked_fill(~valid, 0.0)

        if self.mode == "local-p":
            attn = attn * torch.exp(-gap.pow(2) / (2 * (self.D / 2) ** 2))

        context = torch.bmm(attn, values)
        return context, attn
