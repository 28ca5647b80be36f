"""STYLE: OpenNMT-py GlobalAttention ("mlp" score, sequence_mask helper, flattened 2-D linear calls)
BUG: none
STAGE: none
WHEN: never (correct on every contract input)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def sequence_mask(lengths, max_len=None):
    """Creates a boolean mask from sequence lengths."""
    batch_size = lengths.numel()
    max_len = max_len or lengths.max()
    return (torch.arange(0, max_len, device=lengths.device)
            .type_as(lengths)
            .repeat(batch_size, 1)
            .lt(lengths.unsqueeze(1)))


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super(AdditiveAttention, self).__init__()
        self.attn_dim = attn_dim
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def score(self, h_t, h_s):
        src_batch, src_len, src_dim = h_s.size()
        tgt_batch, tgt_len, tgt_dim = h_t.size()
        dim = self.attn_dim
        wq = self.W_q(h_t.reshape(-1, tgt_dim))
        wq = wq.view(tgt_batch, tgt_len, 1, dim).expand(tgt_batch, tgt_len, src_len, dim)
        uh = self.W_k(h_s.contiguous().view(-1, src_dim))
        uh = uh.view(src_batch, 1, src_len, dim).expand(src_batch, tgt_len, src_len, dim)
        wquh = torch.tanh(wq + uh)
        return self.w_v(wquh.view(-1, dim)).view(tgt_batch, tgt_len, src_len)

    def forward(self, queries, keys, values, valid_lens=None):
        batch, source_l, _ = keys.size()
        target_l = queries.size(1)
        align = self.score(queries, keys)
        mask = None
        if valid_lens is not None:
            if valid_lens.dim() == 1:
                mask = sequence_mask(valid_lens, max_len=source_l).unsqueeze(1)  # (B, 1, Tk)
            else:
                mask = sequence_mask(valid_lens.reshape(-1), max_len=source_l).view(batch, target_l, source_l)
            align = align.masked_fill(~mask, torch.finfo(align.dtype).min)
        align_vectors = F.softmax(align.view(batch * target_l, source_l), -1)
        align_vectors = align_vectors.view(batch, target_l, source_l)
        if mask is not None:
            align_vectors = align_vectors.masked_fill(~mask, 0.0)
        c = torch.bmm(self.dropout(align_vectors), values)
        return c, align_vectors
