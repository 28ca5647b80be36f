"""BUG: none
STYLE: OpenNMT GlobalAttention.score, W_a moved to the query side (q @ W_a.weight), bmm
"""
"""Luong global attention, after OpenNMT-py's GlobalAttention.score()."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def sequence_mask(lengths, max_len):
    """lengths (B,) or (B, Tq) -> boolean keep-mask (..., max_len)."""
    return torch.arange(0, max_len, device=lengths.device) < lengths.unsqueeze(-1)


class LuongAttention(nn.Module):
    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        if score not in ["dot", "scaled_dot", "general", "concat"]:
            raise ValueError(
                "Please select a valid attention type (got {:s}): one of "
                "'dot', 'scaled_dot', 'general', 'concat'.".format(str(score)))
        if score in ("dot", "scaled_dot") and query_dim != key_dim:
            raise ValueError(f"{score} attention needs query_dim == key_dim ({query_dim} != {key_dim})")
        self.attn_type = score
        self.query_dim, self.key_dim = query_dim, key_dim
        if score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        elif score == "concat":
            if attn_dim is None:
                raise ValueError("concat attention needs attn_dim")
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def score(self, h_t, h_s):
        """h_t (B, tgt_len, dq), h_s (B, src_len, dk) -> (B, tgt_len, src_len)"""
        src_batch, src_len, src_dim = h_s.size()
        tgt_batch, tgt_len, tgt_dim = h_t.size()
        if self.attn_type in ["general", "dot", "scaled_dot"]:
            if self.attn_type == "general":
                # q . (W_a k) = (W_a^T q) . k: move W_a to the target side
                h_t = torch.matmul(h_t, self.W_a.weight)
            h_s_ = h_s.transpose(1, 2)
            align = torch.bmm(h_t, h_s_)
            if self.attn_type == "scaled_dot":
                align = align / math.sqrt(self.key_dim)
            return align
        wq = F.linear(h_t, self.W_a.weight[:, :tgt_dim])
        wq = wq.view(tgt_batch, tgt_len, 1, -1).expand(tgt_batch, tgt_len, src_len, wq.size(-1))
        uh = F.linear(h_s, self.W_a.weight[:, tgt_dim:])
        uh = uh.view(src_batch, 1, src_len, -1)
        wquh = torch.tanh(wq + uh)
        return self.v_a(wquh).squeeze(-1)

    def forward(self, queries, keys, values, valid_lens=None):
        align = self.score(queries, keys)
        if valid_lens is not None:
            mask = sequence_mask(valid_lens, keys.size(1))
            if mask.dim() == 2:
                mask = mask.unsqueeze(1)  # make it broadcastable over tgt_len
            align = align.masked_fill(~mask, torch.finfo(align.dtype).min)
            align_vectors = F.softmax(align, -1).masked_fill(~mask, 0.0)
        else:
            align_vectors = F.softmax(align, -1)
        c = torch.bmm(self.dropout(align_vectors), values)
        return c, align_vectors
