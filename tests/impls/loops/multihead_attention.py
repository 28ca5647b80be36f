import torch
from torch import nn
from torch.nn import functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"{embed_dim} is not a multiple of {num_heads}")
        self.num_heads = num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.p = dropout

    def forward(self, queries, keys, values, mask=None):
        q, k, v = self.W_q(queries), self.W_k(keys), self.W_v(values)
        d = q.shape[-1] // self.num_heads
        B, Tq, Tk = q.shape[0], q.shape[1], k.shape[1]
        if mask is None:
            mask = torch.ones(1, 1, 1, 1, dtype=torch.bool, device=q.device)
        mask = mask.expand(B, self.num_heads, Tq, Tk)
        contexts, heads = [], []
        for n in range(self.num_heads):
            part = slice(n * d, (n + 1) * d)
            s = q[..., part] @ k[..., part].transpose(1, 2) / d ** 0.5
            s = torch.where(mask[:, n], s, torch.finfo(s.dtype).min)
            w = s.softmax(-1) * mask[:, n].any(-1, keepdim=True)
            heads.append(w)
            contexts.append(F.dropout(w, self.p, self.training) @ v[..., part])
        return self.W_o(torch.cat(contexts, dim=-1)), torch.stack(heads, dim=1)
