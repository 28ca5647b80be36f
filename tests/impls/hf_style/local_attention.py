"""Global/local attention in the style of a seq2seq toolkit (OpenNMT-like).

Luong, Pham & Manning (2015), "Effective Approaches to Attention-based
Neural Machine Translation", section 3.2 (local attention), "general" score.
"""
import torch
from torch import nn


def sequence_mask(lengths, max_len):
    """lengths: (...,) long -> (..., max_len) bool, True for valid source steps."""
    steps = torch.arange(max_len, device=lengths.device)
    return steps < lengths.unsqueeze(-1)


class LocalAttention(nn.Module):
    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super(LocalAttention, self).__init__()
        if not (isinstance(window, int) and not isinstance(window, bool)) or window < 1:
            raise ValueError("window D must be an int >= 1 (got %r)" % (window,))
        if mode not in ["local-m", "local-p"]:
            raise ValueError("Please select a valid attention type: 'local-m' or 'local-p' (got %r)" % (mode,))
        self.dim = query_dim
        self.window = window
        self.attn_type = mode
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if self.attn_type == "local-p":
            if not isinstance(align_dim, int) or isinstance(align_dim, bool):
                raise ValueError("local-p attention needs align_dim for the position predictor")
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def score(self, h_t, h_s):
        """h_t: (batch, tgt_len, dim); h_s: (batch, src_len, key_dim) -> (batch, tgt_len, src_len)."""
        w = self.W_a.weight.to(h_t)
        h_s_ = torch.matmul(h_s, w.t())
        return torch.bmm(h_t, h_s_.transpose(1, 2))

    def predict_position(self, h_t, src_len):
        """p_t = S * sigmoid(v_p^T tanh(W_p h_t)) with S = src_len - 1."""
        wp = self.W_p.weight.to(h_t)
        vp = self.v_p.weight.to(h_t)
        pre = torch.matmul(torch.tanh(torch.matmul(h_t, wp.t())), vp.t()).squeeze(2)
        return (src_len.to(h_t.dtype) - 1) * torch.sigmoid(pre)

    def forward(self, queries, keys, values, valid_lens=None):
        h_t, h_s = queries, keys
        batch, tgt_len, _ = h_t.size()
        src_len = h_s.size(1)

        if valid_lens is None:
            memory_lengths = torch.full((batch, tgt_len), src_len, dtype=torch.long, device=h_t.device)
        else:
            memory_lengths = valid_lens.to(h_t.device).long()
            if memory_lengths.dim() == 1:
                memory_lengths = memory_lengths.unsqueeze(1).repeat(1, tgt_len)

        align = self.score(h_t, h_s)                                   # (batch, tgt_len, src_len)

        if self.attn_type == "local-m":
            p_t = torch.arange(tgt_len, dtype=h_t.dtype, device=h_t.device).unsqueeze(0).repeat(batch, 1)
        else:
            p_t = self.predict_position(h_t, memory_lengths)            # (batch, tgt_len)

        src_pos = torch.arange(src_len, dtype=h_t.dtype, device=h_t.device).view(1, 1, -1)
        dist = src_pos - p_t.unsqueeze(2)
        mask = sequence_mask(memory_lengths, src_len)                 # (batch, tgt_len, src_len)
        mask = mask & (dist.detach().abs() <= self.window)

        # masked softmax written out by hand; rows without a single valid
        # source step end up with an all-zero distribution.
        row_max = align.masked_fill(~mask, torch.finfo(align.dtype).min).max(dim=2, keepdim=True)[0]
        shifted = (align - row_max.detach()).masked_fill(~mask, float("-inf"))
        exp_align = torch.exp(shifted)
        denom = exp_align.sum(dim=2, keepdim=True)
        denom = torch.where(denom > 0, denom, torch.ones_like(denom))
        align_vectors = exp_align / denom

        if self.attn_type == "local-p":
            sigma = self.window / 2.0
            align_vectors = align_vectors * torch.exp(-(dist * dist) / (2 * sigma * sigma))

        c = torch.bmm(align_vectors, values)
        return c, align_vectors
