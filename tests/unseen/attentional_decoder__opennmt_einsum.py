"""STYLE: OpenNMT-py "global attention" (general score, linear_in applied to the query, input_feed) written with torch.einsum and a hand-rolled masked softmax
BUG: none
STAGE: none
"""
import torch
from torch import nn
import torch.nn.functional as F


def _masked_softmax(scores, mask):
    # scores (B, S), mask (B, S) bool or None
    if mask is None:
        return torch.softmax(scores, dim=-1)
    row_max = scores.masked_fill(~mask, float("-inf")).amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max).detach()
    exps = torch.exp((scores - row_max).masked_fill(~mask, float("-inf")))
    denom = exps.sum(dim=-1, keepdim=True).clamp(min=1.0)   # >= 1 whenever a key is allowed
    return exps / denom


class AttentionalDecoder(nn.Module):
    def __init__(self, embed_dim, hidden_dim, memory_dim, dropout=0.0):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.cell = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.W_a = nn.Linear(memory_dim, hidden_dim, bias=False)   # OpenNMT's linear_in
        self.W_c = nn.Linear(hidden_dim + memory_dim, hidden_dim, bias=False)  # linear_out
        self.dropout_p = dropout

    def _attend(self, h_t, memory_bank, memory_mask):
        # general score h_t . (W_a m_s) == (W_a^T h_t) . m_s : project the query, not the memory
        h_t_ = torch.einsum("bh,hm->bm", h_t, self.W_a.weight)
        align = torch.einsum("bm,bsm->bs", h_t_, memory_bank)
        align_vectors = _masked_softmax(align, memory_mask)
        c = torch.einsum("bs,bsm->bm", align_vectors, memory_bank)
        return c, align_vectors

    def step(self, y_t, memory, memory_mask=None, state=None):
        if state is None:
            z = torch.zeros(y_t.shape[0], self.hidden_dim, dtype=y_t.dtype, device=y_t.device)
            state = (z, z, z)
        h_prev, c_prev, input_feed = state
        decoder_input = torch.cat([y_t, input_feed], dim=1)
        h_t, c_t = self.cell(decoder_input, (h_prev, c_prev))
        c, align_vectors = self._attend(h_t, memory, memory_mask)
        attn_h = torch.tanh(self.W_c(torch.cat([h_t, c], dim=1)))
        attn_h = F.dropout(attn_h, p=self.dropout_p, training=self.training)
        return attn_h, align_vectors, (h_t, c_t, attn_h)

    def forward(self, targets, memory, memory_mask=None, state=None):
        dec_outs, attns = [], []
        for emb_t in targets.unbind(dim=1):
            out, attn, state = self.step(emb_t, memory, memory_mask, state)
            dec_outs.append(out)
            attns.append(attn)
        return torch.stack(dec_outs, 1), torch.stack(attns, 1), state
