"""STYLE: written from the contract alone (CONTRACT-next.md section 14), never from the kit's reference
BUG: The key mask only applies the window and never masks keys at index >= valid length (valid_lens is used only for p_t), so padded keys receive weight.
"""
import torch
from torch import nn


class LocalAttention(nn.Module):
    """Straightforward per-(batch, target) loop; each row is built from a
    list of window positions."""

    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError("window must be an int >= 1")
        if mode not in ("local-m", "local-p"):
            raise ValueError("mode must be 'local-m' or 'local-p'")
        if mode == "local-p" and align_dim is None:
            raise ValueError("local-p requires align_dim")
        self.window = window
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        D = self.window
        Wa = self.W_a.weight.to(queries)
        proj = keys @ Wa.T                                  # (B, Tk, dq): W_a k_s
        weights = []
        for b in range(B):
            per_b = []
            for t in range(Tq):
                if valid_lens is None:
                    L = Tk
                elif valid_lens.dim() == 1:
                    L = int(valid_lens[b])
                else:
                    L = int(valid_lens[b, t])
                h = queries[b, t]
                if self.mode == "local-m":
                    p = queries.new_tensor(float(t))
                else:
                    Wp = self.W_p.weight.to(queries)
                    vp = self.v_p.weight.to(queries)
                    p = (L - 1) * torch.sigmoid(vp @ torch.tanh(Wp @ h))[0]
                pv = p.detach()
                # source positions inside the window
                window_pos = [s for s in range(Tk) if bool(abs(s - pv) <= D)]
                row = [queries.new_zeros(())] * Tk
                if window_pos:
                    sc = torch.stack([proj[b, s] @ h for s in window_pos])
                    a = torch.softmax(sc, dim=0)
                    for i, s in enumerate(window_pos):
                        w = a[i]
                        if self.mode == "local-p":
                            w = w * torch.exp(-(s - p) ** 2 / (2 * (D / 2) ** 2))
                        row[s] = w
                per_b.append(torch.stack(row) if Tk else queries.new_zeros(0))
            weights.append(torch.stack(per_b) if Tq else queries.new_zeros(0, Tk))
        weights = torch.stack(weights) if B else queries.new_zeros(0, Tq, Tk)
        return weights @ values, weights
