"""STYLE: OpenNMT-py GlobalAttention "general" score (linear_in applied to the decoder state h_t)
BUG: The "general" score applies W_a to the query instead of the key, computing (W_a q_i) . k_j = q_i . (W_a^T k_j).
STAGE: scores
WHEN: score="general" with query_dim == key_dim (with unequal dims it raises a shape error).
"""
import torch
import torch.nn as nn


def sequence_mask(lengths, max_len):
    return torch.arange(0, max_len, device=lengths.device).lt(lengths.unsqueeze(-1))


class LuongAttention(nn.Module):
    _choices = ("dot", "scaled_dot", "general", "concat")

    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super(LuongAttention, self).__init__()
        if score not in self._choices:
            raise ValueError("Please select a valid attention type (got {:s}): one of {}".format(
                str(score), ", ".join(self._choices)))
        if score in ("dot", "scaled_dot") and query_dim != key_dim:
            raise ValueError("%s attention needs query_dim == key_dim" % score)
        self.attn_type = score
        self.key_dim = key_dim
        if score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        elif score == "concat":
            if attn_dim is None:
                raise ValueError("concat attention needs attn_dim")
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def score(self, h_t, h_s):
        tgt_batch, tgt_len, tgt_dim = h_t.size()
        src_batch, src_len, src_dim = h_s.size()
        if self.attn_type in ("dot", "scaled_dot", "general"):
            if self.attn_type == "general":
                h_t_ = self.W_a(h_t.reshape(tgt_batch * tgt_len, tgt_dim))
                h_t = h_t_.view(tgt_batch, tgt_len, -1)
            h_s_ = h_s.transpose(1, 2)
            out = torch.bmm(h_t, h_s_)
            if self.attn_type == "scaled_dot":
                out = out / self.key_dim ** 0.5
            return out
        wq = h_t.unsqueeze(2).expand(tgt_batch, tgt_len, src_len, tgt_dim)
        uh = h_s.unsqueeze(1).expand(src_batch, tgt_len, src_len, src_dim)
        return self.v_a(torch.tanh(self.W_a(torch.cat([wq, uh], dim=-1)))).squeeze(-1)

    def forward(self, queries, keys, values, valid_lens=None):
        align = self.score(queries, keys)
        if valid_lens is not None:
            lens = valid_lens.unsqueeze(1) if valid_lens.dim() == 1 else valid_lens
            mask = sequence_mask(lens, keys.size(1))
            align = align.masked_fill(~mask, torch.finfo(align.dtype).min)
            align_vectors = torch.softmax(align, -1) * mask
        else:
            align_vectors = torch.softmax(align, -1)
        c = torch.bmm(self.dropout(align_vectors), values)
        return c, align_vectors
