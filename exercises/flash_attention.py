"""FlashAttention forward: a stub for you to fill in.

Generated from grader/problems/flash_attention.py; grade it with `pytest -k flash_attention`.
"""

import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    """output = softmax(q k^T / sqrt(d)) v over the allowed keys; lse = logsumexp of each row's scaled
    scores over its allowed keys. is_causal: key j is allowed for query i when j <= i + (Tk - Tq)
    (aligned to the bottom right). A row with no allowed key has output 0 and lse -inf.
    Computed in blocks of block_q queries and block_k keys with an online softmax: during the call no
    tensor an operation allocates has more than max(S, L*block_q*max(block_k, d, dv)) elements (S the
    largest input or output). block_q < 1 or block_k < 1 raises ValueError. Results do not depend on
    the block sizes beyond rounding. Do not call F.scaled_dot_product_attention.

    Args:
        queries: (..., Tq, d)
        keys: (..., Tk, d)
        values: (..., Tk, dv)
        is_causal: bool: key j allowed for query i when j <= i + (Tk - Tq)
        block_q: queries per block (>= 1)
        block_k: keys per block (>= 1)

    Returns:
        output: (..., Tq, dv)
        lse: (..., Tq), -inf on a row with no allowed key

    Dims:
        Tq: number of queries
        Tk: number of keys (= values)
        dv: value feature size
        d: feature size per head, or the attention size
        ...: zero or more leading (batch) dims
    """
    raise NotImplementedError("flash_attention: not started")
