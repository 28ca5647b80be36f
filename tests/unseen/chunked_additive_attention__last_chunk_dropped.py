"""BUG: the key-chunk loop runs Tk // kc times, so when kc does not divide Tk the last partial chunk of keys is never scored: those scores stay 0 in the zero-initialised buffer and still get weight. Differs on: Tk % kc != 0, e.g. max_elements = 3*h with Tk = 7 (or any Tk > max_elements//h that is not a multiple of it). With the default max_elements kc = Tk and it is right.
STAGE: scores of the keys in the last (partial) key chunk
STYLE: zero-initialised score buffer, for n in range(num_chunks) with num_chunks = Tk // chunk
"""
import torch


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None,
                               max_elements=2 ** 20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError("max_elements must be >= h")
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    qh = queries @ W_q.T
    kh = keys @ W_k.T
    scores = queries.new_zeros(B, Tq, Tk)
    kc = max(1, min(Tk, max_elements // h))
    qc = max(1, min(Tq, max_elements // (kc * h)))
    num_k_chunks = Tk // kc
    for b in range(B):
        for i0 in range(0, Tq, qc):
            for n in range(num_k_chunks):
                j0 = n * kc
                f = torch.tanh(qh[b, i0:i0 + qc, None] + kh[b, None, j0:j0 + kc])
                scores[b, i0:i0 + qc, j0:j0 + kc] = (f @ w_v[0])
    if valid_lens is not None:
        lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep = torch.arange(Tk, device=scores.device) < lens[..., None]
        weights = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), -1) * keep
    else:
        weights = torch.softmax(scores, -1)
    return weights @ values, weights
