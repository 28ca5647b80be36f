"""
BUG: sink keys are allowed unconditionally (mask = (causal & in_window) | is_sink), so a query can attend to a sink key that lies after its own position.
STAGE: the allowed-key mask (sink term not restricted to j <= pos)
Style: torch.where index arithmetic over [sinks | band], finfo.min masking, preallocated output.
"""
import torch
import torch.nn.functional as F


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if window < 1 or num_sinks < 0 or block_size < 1:
        raise ValueError(f"bad arguments window={window} num_sinks={num_sinks} block_size={block_size}")
    if queries.dim() != keys.dim() or keys.dim() != values.dim():
        raise ValueError("rank mismatch")
    if queries.shape[:-2] != keys.shape[:-2] or queries.shape[:-2] != values.shape[:-2]:
        raise ValueError("leading dims differ")
    if queries.shape[-1] != keys.shape[-1] or keys.shape[-2] != values.shape[-2]:
        raise ValueError("incompatible shapes")

    Tq, d = queries.shape[-2:]
    Tk, dv = values.shape[-2:]
    shift = Tk - Tq
    dev = queries.device
    acc = queries.dtype if queries.dtype == torch.float64 else torch.float32
    neg = torch.finfo(acc).min

    out = queries.new_zeros(queries.shape[:-2] + (Tq, dv))
    for s in range(0, Tq, block_size):
        e = min(s + block_size, Tq)
        lo = max(s + shift - window + 1, 0)
        hi = min(e + shift, Tk)
        if hi <= 0:
            continue
        ns = min(num_sinks, lo)
        t = torch.arange(ns + hi - lo, device=dev)
        key_idx = torch.where(t < ns, t, t - ns + lo)

        q_pos = torch.arange(s, e, device=dev).unsqueeze(-1) + shift
        local = (key_idx <= q_pos) & (key_idx > q_pos - window)
        sink = key_idx < num_sinks
        ok = local | sink

        kb = keys.index_select(-2, key_idx).to(acc)
        vb = values.index_select(-2, key_idx).to(acc)
        logits = (queries[..., s:e, :].to(acc) @ kb.transpose(-1, -2)) * d ** -0.5
        logits = torch.where(ok, logits, torch.full_like(logits, neg))
        p = F.softmax(logits, dim=-1) * ok.any(-1, keepdim=True).to(acc)
        out[..., s:e, :] = (p @ vb).to(out.dtype)
    return out
