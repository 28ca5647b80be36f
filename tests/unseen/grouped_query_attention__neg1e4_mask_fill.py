"""STYLE: BERT/Hugging Face legacy extended attention mask ((1 - mask) * -10000.0 additive bias), GQA folded into the query axis
BUG: masked keys get an additive bias of -1e4 instead of a fill far below every score, so they keep weight when allowed scores are themselves around -1e4 or lower.
STAGE: masked scores
WHEN: with a mask and scaled scores of magnitude ~1e4 (float32 stability case); ordinary scores are right
"""
import torch


def grouped_query_attention(queries, keys, values, mask=None):
    bsz, n_heads, q_len, head_dim = queries.shape
    n_kv_heads, kv_len = keys.shape[1], keys.shape[2]
    if n_heads % n_kv_heads:
        raise ValueError("n_heads must be a multiple of n_kv_heads")
    n_rep = n_heads // n_kv_heads

    # fold the heads of a group into the query axis: keys/values are read once per kv head
    q = queries.reshape(bsz, n_kv_heads, n_rep * q_len, head_dim)
    attn = torch.matmul(q, keys.transpose(2, 3)) * head_dim ** -0.5
    attn = attn.view(bsz, n_heads, q_len, kv_len)

    if mask is not None:
        bias = (1.0 - mask.to(attn.dtype)) * -10000.0
        attn = attn + bias
    probs = torch.softmax(attn, dim=-1)
    if mask is not None:
        probs = probs * mask

    out = torch.matmul(probs.view(bsz, n_kv_heads, n_rep * q_len, kv_len), values)
    return out.view(bsz, n_heads, q_len, values.shape[-1]), probs
