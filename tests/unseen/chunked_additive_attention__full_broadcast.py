"""BUG: D2L-style one-shot broadcast builds the full (B, Tq, Tk, h) feature tensor and never chunks, ignoring max_elements.
STAGE: the memory bound
"""
import torch

from .masked_softmax import masked_softmax


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    if max_elements < W_q.shape[0]:
        raise ValueError("max_elements must be >= h")
    queries, keys = queries @ W_q.T, keys @ W_k.T
    # After dimension expansion, shape of queries: (batch_size, no. of
    # queries, 1, num_hiddens) and shape of keys: (batch_size, 1, no. of
    # key-value pairs, num_hiddens). Sum them up with broadcasting
    features = queries.unsqueeze(2) + keys.unsqueeze(1)
    features = torch.tanh(features)
    # There is only one output of w_v, so we remove the last one-dimensional
    # entry from the shape. Shape of scores: (batch_size, no. of queries,
    # no. of key-value pairs)
    scores = (features @ w_v.T).squeeze(-1)
    attention_weights = masked_softmax(scores, valid_lens)
    return torch.bmm(attention_weights, values), attention_weights
