"""Reference: one decoding step over a paged KV cache, one sequence at a time, its own blocks only."""
import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    """queries (B, Hq, d), k_cache (N_blocks, block_size, Hkv, d), v_cache (N_blocks, block_size, Hkv, dv),
    block_tables (B, max_blocks), context_lens (B,) -> output (B, Hq, dv). Token t of sequence b is slot
    t % block_size of block block_tables[b, t // block_size]; query head n reads key/value head n // G."""
    B, Hq, d = queries.shape
    block_size, Hkv, dv = v_cache.shape[1], v_cache.shape[2], v_cache.shape[3]
    if Hq % Hkv:
        raise ValueError(f"paged_attention: Hq = {Hq} query heads is not a multiple of Hkv = {Hkv}")
    G = Hq // Hkv
    outs = []
    for b in range(B):
        n = int(context_lens[b])
        blocks = block_tables[b, :(n + block_size - 1) // block_size].long()  # this sequence's blocks, in order
        k = k_cache[blocks].reshape(-1, Hkv, d)[:n]  # (n, Hkv, d): valid tokens only, before any product
        v = v_cache[blocks].reshape(-1, Hkv, dv)[:n]
        q = queries[b].reshape(Hkv, G, d)  # the G query heads of each key/value head
        scores = torch.einsum("hgd,nhd->hgn", q, k) / d**0.5
        weights = torch.softmax(scores, dim=-1)  # n = 0: no key, and the output below is 0
        outs.append(torch.einsum("hgn,nhv->hgv", weights, v).reshape(Hq, dv))
    return torch.stack(outs)
