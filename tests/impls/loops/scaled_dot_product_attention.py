import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    """Flatten the leading dims and attend one (batch, query) row at a time."""
    *lead, Tq, d = queries.shape
    Tk = keys.shape[-2]
    if mask is None:
        mask = torch.ones(Tq, Tk, dtype=torch.bool, device=queries.device)
    mask = mask.expand(*lead, Tq, Tk).reshape(-1, Tq, Tk)
    q, k, v = queries.reshape(-1, Tq, d), keys.reshape(-1, Tk, d), values.reshape(-1, Tk, values.shape[-1])
    rows, outs = [], []
    for n in range(q.shape[0]):
        for i in range(Tq):
            s = (k[n] @ q[n, i]) * d ** -0.5
            allowed = mask[n, i]
            if allowed.any():
                s = s.masked_fill(~allowed, -1e30 if s.dtype != torch.float16 else -6e4)
                w = torch.exp(s - s.max())
                w = w * allowed / (w * allowed).sum()
            else:
                w = torch.zeros_like(s)
            rows.append(w)
            outs.append(w @ v[n])
    weights = torch.stack(rows).reshape(*lead, Tq, Tk)
    return torch.stack(outs).reshape(*lead, Tq, values.shape[-1]), weights
