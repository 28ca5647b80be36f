"""Memory-bounded additive attention: a stub for you to fill in.

Generated from grader/problems/chunked_additive_attention.py; grade it with `pytest -k chunked_additive_attention`.
"""

import torch

from .masked_softmax import masked_softmax


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    """The result of AdditiveAttention in eval() mode (scores = w_v . tanh(W_q q_i + W_k k_j), masked
    softmax, weights @ values), with the weights given as tensors in nn.Linear layout, without ever
    building the full (B, Tq, Tk, h) tensor: during the call no tensor an operation allocates (views
    and in-place results aside) may exceed max(max_elements, S) elements, S the largest of any input,
    B*Tq*Tk, B*Tq*dv, B*Tq*h, B*Tk*h. max_elements < h raises ValueError; any larger value must work.
    Gradients flow to every input, weights included.

    Args:
        queries: (B, Tq, dq)
        keys: (B, Tk, dk)
        values: (B, Tk, dv)
        W_q: (h, dq)
        W_k: (h, dk)
        w_v: (1, h)
        valid_lens: None, (B,) or (B, Tq) integer tensor; key j is valid for a query when j < valid_len
        max_elements: the allocation bound, in elements (>= h)

    Returns:
        output: (B, Tq, dv)
        weights: (B, Tq, Tk)

    Dims:
        B: batch size
        Tq: number of queries
        Tk: number of keys (= values)
        dq: query feature size
        dk: key feature size
        dv: value feature size
        h: attention hidden size
    """
    raise NotImplementedError("chunked_additive_attention: not started")
