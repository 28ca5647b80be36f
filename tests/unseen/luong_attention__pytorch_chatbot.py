"""BUG: none
STYLE: PyTorch chatbot tutorial's Luong "Attn" module (dot_score / general_score / concat_score methods, hidden expanded and concatenated for concat), batch-first, with a d2l-style sequence-mask masked softmax inlined (self-contained instead of `from .masked_softmax import`).
"""
import math
import torch
from torch import nn

_METHODS = ("dot", "scaled_dot", "general", "concat")


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    Tk = scores.shape[-1]
    lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens         # (B, 1) or (B, Tq)
    keep = torch.arange(Tk, device=scores.device)[None, None, :] < lens[..., None]
    live = keep.any(dim=-1, keepdim=True)
    x = scores.masked_fill(~keep, float("-inf")).masked_fill(~live, 0.0)
    return torch.softmax(x, dim=-1).masked_fill(~live, 0.0)


class LuongAttention(nn.Module):
    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        if score not in _METHODS:
            raise ValueError(f"{score!r} is not an appropriate attention method; choose one of {_METHODS}")
        if score in ("dot", "scaled_dot") and query_dim != key_dim:
            raise ValueError(f"{score} needs query_dim == key_dim")
        self.method = score
        self.key_dim = key_dim
        if score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        elif score == "concat":
            if attn_dim is None:
                raise ValueError("concat needs attn_dim")
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def dot_score(self, hidden, encoder_output):
        return torch.bmm(hidden, encoder_output.transpose(1, 2))

    def general_score(self, hidden, encoder_output):
        energy = self.W_a(encoder_output)
        return torch.bmm(hidden, energy.transpose(1, 2))

    def concat_score(self, hidden, encoder_output):
        B, Tq, _ = hidden.shape
        Tk = encoder_output.shape[1]
        h = hidden.unsqueeze(2).expand(B, Tq, Tk, hidden.shape[-1])
        e = encoder_output.unsqueeze(1).expand(B, Tq, Tk, encoder_output.shape[-1])
        energy = self.W_a(torch.cat((h, e), dim=-1)).tanh()
        return self.v_a(energy).squeeze(-1)

    def forward(self, queries, keys, values, valid_lens=None):
        if self.method == "general":
            attn_energies = self.general_score(queries, keys)
        elif self.method == "concat":
            attn_energies = self.concat_score(queries, keys)
        else:
            attn_energies = self.dot_score(queries, keys)
            if self.method == "scaled_dot":
                attn_energies = attn_energies / math.sqrt(self.key_dim)
        weights = masked_softmax(attn_energies, valid_lens)
        return torch.bmm(self.dropout(weights), values), weights
