"""Reference: causal sliding-window attention with attention sinks, one block of queries at a time."""
import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    """queries (..., Tq, d), keys (..., Tk, d), values (..., Tk, dv) -> output (..., Tq, dv).
    Key j is allowed for query i when j <= pos(i) and (j > pos(i) - window or j < num_sinks), pos(i) = i + Tk - Tq.
    Each block of queries meets only the keys its rows can see: a contiguous range and the sinks before it."""
    if window < 1 or num_sinks < 0 or block_size < 1:
        raise ValueError(f"sliding_window_attention: window = {window} and block_size = {block_size} must be at least "
                         f"1, num_sinks = {num_sinks} at least 0")
    Tq, d = queries.shape[-2], queries.shape[-1]
    Tk = keys.shape[-2]
    shift = Tk - Tq  # bottom-right alignment: pos(i) = i + shift
    outs = []
    for q0 in range(0, Tq, block_size):
        q = queries[..., q0:q0 + block_size, :]  # (..., bq, d), the last block may be partial
        bq = q.shape[-2]
        q_pos = torch.arange(q0 + shift, q0 + shift + bq, device=queries.device)
        lo = max(q0 + shift - window + 1, 0)  # the keys the block's rows can see: lo .. hi - 1
        hi = max(min(q0 + shift + bq, Tk), lo)
        sinks = min(num_sinks, lo)  # the sinks before the window (those inside it are in it already)
        k = torch.cat((keys[..., :sinks, :], keys[..., lo:hi, :]), dim=-2)
        v = torch.cat((values[..., :sinks, :], values[..., lo:hi, :]), dim=-2)
        k_pos = torch.cat((torch.arange(sinks), torch.arange(lo, hi))).to(queries.device)
        allowed = (k_pos[None, :] <= q_pos[:, None]) & ((k_pos[None, :] > q_pos[:, None] - window)
                                                         | (k_pos[None, :] < num_sinks))  # (bq, n)
        scores = (q @ k.transpose(-2, -1)) / d**0.5  # (..., bq, n), n <= sinks + block_size + window - 1
        filled = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        weights = torch.softmax(filled, dim=-1) * allowed  # a row with no allowed key: all zeros
        outs.append(weights @ v)
    return torch.cat(outs, dim=-2)
