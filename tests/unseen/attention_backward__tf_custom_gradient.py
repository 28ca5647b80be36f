"""STYLE: TensorFlow @tf.custom_gradient port (forward returns y and a grad(dy) closure; tf.nn.softmax on -inf-masked logits)
BUG: Masked logits are filled with -inf and passed straight to softmax, so a causal row with no allowed key gives NaN probabilities that spread NaN into D, dQ, dK and dV.
STAGE: D
WHEN: is_causal=True with Tq > Tk (the first Tq - Tk rows have no allowed key).
"""
import math

import torch


def _band_part_mask(num_rows, num_cols, device):
    # tf.linalg.band_part(ones, -1, num_cols - num_rows): lower triangle aligned to the bottom right
    return torch.ones(num_rows, num_cols, dtype=torch.bool, device=device).tril(num_cols - num_rows)


def _attention_with_grad(q, k, v, causal):
    scale = 1.0 / math.sqrt(q.shape[-1])
    logits = tf_matmul(q, k, transpose_b=True) * scale
    if causal:
        mask = _band_part_mask(logits.shape[-2], logits.shape[-1], logits.device)
        logits = logits.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    y = tf_matmul(probs, v)

    def grad(dy):
        dv = tf_matmul(probs, dy, transpose_a=True)
        dprobs = tf_matmul(dy, v, transpose_b=True)
        dsum = tf_reduce_sum(dy * y, axis=-1, keepdims=True)
        dlogits = probs * (dprobs - dsum)
        dq = tf_matmul(dlogits, k) * scale
        dk = tf_matmul(dlogits, q, transpose_a=True) * scale
        return dq, dk, dv

    return y, grad


def tf_matmul(a, b, transpose_a=False, transpose_b=False):
    if transpose_a:
        a = a.transpose(-2, -1)
    if transpose_b:
        b = b.transpose(-2, -1)
    return a @ b


def tf_reduce_sum(x, axis, keepdims=False):
    return x.sum(dim=axis, keepdim=keepdims)


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    compute = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    q, k, v, dy = (t.to(compute) for t in (queries, keys, values, grad_output))
    _, grad = _attention_with_grad(q, k, v, is_causal)
    dq, dk, dv = grad(dy)
    return dq.to(queries.dtype), dk.to(keys.dtype), dv.to(values.dtype)
