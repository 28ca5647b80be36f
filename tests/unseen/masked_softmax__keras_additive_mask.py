"""STYLE: Keras/TensorFlow tutorial (sequence_mask as a float mask, `scores += (1 - mask) * -1e9`) ported to torch
BUG: Masking adds -1e9 instead of zeroing the weights, so a row with valid_len == 0 comes out as an ordinary softmax over all keys instead of all zeros.
STAGE: weights
WHEN: Any row whose valid_len is 0 (valid_lens of shape (B,) or (B, Tq)).
"""
import torch
import torch.nn.functional as F


def sequence_mask(lengths, maxlen, dtype):
    # tf.sequence_mask(lengths, maxlen, dtype): 1.0 where j < length, 0.0 elsewhere
    row_vector = torch.arange(maxlen, device=lengths.device)
    matrix = lengths.unsqueeze(-1)
    return (row_vector < matrix).to(dtype)


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens.unsqueeze(-1).expand(-1, scores.shape[1])  # (B, Tq)
    mask = sequence_mask(valid_lens, scores.shape[-1], scores.dtype)  # (B, Tq, Tk)
    scores = scores + (1.0 - mask) * -1e9
    return F.softmax(scores, dim=-1)
