"""Correct, written with Python loops and a manual, stable softmax."""
import torch


def masked_softmax(scores, valid_lens=None):
    B, Tq, Tk = scores.shape
    rows = []
    for b in range(B):
        cols = []
        for i in range(Tq):
            if valid_lens is None:
                n = Tk
            else:
                n = int(valid_lens[b, i] if valid_lens.dim() == 2 else valid_lens[b])
            row = scores[b, i]
            if n == 0:
                cols.append(torch.zeros_like(row))
                continue
            valid = row[:n]
            e = torch.exp(valid - valid.max())
            cols.append(torch.cat([e / e.sum(), torch.zeros_like(row[n:])]))
        rows.append(torch.stack(cols))
    return torch.stack(rows)
