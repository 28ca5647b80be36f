"""Causal sliding-window attention with attention sinks: block_size queries at a time, each block against the sinks and
the contiguous key range its rows can see, that range taken 128 keys at a time (FlashAttention-2's key tile), so that a
long window (Mistral's 4096) never puts more than block_size x 128 scores in memory."""
import torch

KEY_TILE = 128


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if window < 1 or num_sinks < 0 or block_size < 1:
        raise ValueError(f"sliding_window_attention: window = {window}, block_size = {block_size} must be at least 1, "
                         f"num_sinks = {num_sinks} at least 0")
    Tq, d = queries.shape[-2], queries.shape[-1]
    Tk, dv = keys.shape[-2], values.shape[-1]
    shift = Tk - Tq  # pos(i) = i + shift
    outs = []
    for q0 in range(0, Tq, block_size):
        q = queries[..., q0:q0 + block_size, :]
        bq = q.shape[-2]
        q_pos = torch.arange(q0 + shift, q0 + shift + bq, device=queries.device)
        lo = max(q0 + shift - window + 1, 0)
        hi = max(min(q0 + shift + bq, Tk), lo)
        sinks = min(num_sinks, lo)
        k = torch.cat((keys[..., :sinks, :], keys[..., lo:hi, :]), dim=-2)
        v = torch.cat((values[..., :sinks, :], values[..., lo:hi, :]), dim=-2)
        k_pos = torch.cat((torch.arange(sinks), torch.arange(lo, hi))).to(queries.device)
        m = None
        l = torch.zeros(*q.shape[:-1], dtype=q.dtype, device=q.device)
        acc = torch.zeros(*q.shape[:-1], dv, dtype=q.dtype, device=q.device)
        for t0 in range(0, k.shape[-2], KEY_TILE):
            kt, vt, pt = k[..., t0:t0 + KEY_TILE, :], v[..., t0:t0 + KEY_TILE, :], k_pos[t0:t0 + KEY_TILE]
            allowed = (pt[None, :] <= q_pos[:, None]) & ((pt[None, :] > q_pos[:, None] - window) | (pt[None, :] < num_sinks))
            s = (q @ kt.transpose(-2, -1)) / d**0.5
            s = s.masked_fill(~allowed, torch.finfo(s.dtype).min)
            if m is None:  # the row maximum, from the first tile (every later exp is taken relative to it)
                m = s.amax(-1, keepdim=True)
            p = torch.exp(s - m) * allowed
            l = l + p.sum(-1)
            acc = acc + p @ vt
        if m is None:  # a block whose rows see no key at all (pos < 0 for every row)
            outs.append(torch.zeros(*q.shape[:-1], dv, dtype=q.dtype, device=q.device))
            continue
        outs.append(acc / torch.where(l > 0, l, torch.ones_like(l))[..., None])
    return torch.cat(outs, dim=-2)
