"""Paged attention: a stub for you to fill in.

Generated from grader/problems/paged_attention.py; grade it with `pytest -k paged_attention`.
"""

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    """One new token per sequence, already in the cache. Token t (0 <= t < context_lens[b]) of sequence b
    is k_cache[block_tables[b, t // block_size], t % block_size] (likewise v_cache). Query head n uses
    key/value head n // G, G = Hq // Hkv (Hq % Hkv != 0 raises ValueError); scale 1/sqrt(d).
    output[b, n] = softmax(q k^T / sqrt(d)) v over the sequence's context_lens[b] tokens, 0 when it is 0.
    Unused storage (slots past context_lens[b], blocks past the sequence's last) may hold anything, NaN
    and inf included, and must not affect the result. No tensor an operation allocates has more than
    max(S, max(B, max_blocks) * block_size * Hq * max(d, dv)) elements (S the largest input or output):
    never gather the whole batch to the longest table. Do not call F.scaled_dot_product_attention.

    Args:
        queries: (B, Hq, d)
        k_cache: (N_blocks, block_size, Hkv, d)
        v_cache: (N_blocks, block_size, Hkv, dv)
        block_tables: (B, max_blocks) int32 or int64: each sequence's blocks, in order
        context_lens: (B,) int32 or int64: each sequence's number of tokens

    Returns:
        output: (B, Hq, dv)

    Dims:
        B: batch size
        dv: value feature size
        d: feature size per head, or the attention size
        Hq: number of query heads
        Hkv: number of key/value heads (Hq % Hkv == 0)
        N_blocks: physical blocks of a paged cache
        block_size: token slots per block
        max_blocks: entries of a sequence's block table
    """
    raise NotImplementedError("paged_attention: not started")
