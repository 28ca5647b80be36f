"""One query at a time: its own keys (the sinks before its window, then the window), a softmax over them."""
import math

import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if any(isinstance(n, bool) or not isinstance(n, int) for n in (window, num_sinks, block_size)):
        raise ValueError("window, num_sinks and block_size must be ints")
    if window < 1 or num_sinks < 0 or block_size < 1:
        raise ValueError("window >= 1, num_sinks >= 0 and block_size >= 1")
    Tq, Tk = queries.shape[-2], keys.shape[-2]
    rows = []
    for i in range(Tq):
        pos = i + Tk - Tq
        start = max(0, pos - window + 1)
        idx = list(range(min(num_sinks, start))) + list(range(start, pos + 1))
        if not idx:
            rows.append(torch.zeros_like(values[..., 0, :]) * queries[..., i, :1])
            continue
        sel = torch.tensor(idx, device=keys.device)
        k, v = keys.index_select(-2, sel), values.index_select(-2, sel)
        s = (k @ queries[..., i, :, None])[..., 0] / math.sqrt(queries.shape[-1])
        rows.append((torch.softmax(s, dim=-1)[..., None, :] @ v)[..., 0, :])
    return torch.stack(rows, dim=-2)
