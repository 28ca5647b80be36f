"""BUG: none
STYLE: einops/einsum GQA as in lucidrains' x-transformers: explicit group axis 'b h g i d, b h j d -> b h g i j', additive float mask bias.
"""
import torch


def grouped_query_attention(queries, keys, values, mask=None):
    b, hq, i, d = queries.shape
    hkv, j = keys.shape[1], keys.shape[2]
    if hq % hkv:
        raise ValueError("number of query heads must be a multiple of key/value heads")
    g = hq // hkv
    q = queries.reshape(b, hkv, g, i, d) * d ** -0.5
    sim = torch.einsum('bhgid,bhjd->bhgij', q, keys)
    if mask is not None:
        allowed = torch.broadcast_to(mask, (b, hq, i, j)).reshape(b, hkv, g, i, j)
        bias = torch.zeros((), dtype=sim.dtype, device=sim.device).expand(allowed.shape).masked_fill(
            ~allowed, torch.finfo(sim.dtype).min)
        sim = sim + bias
        attn = sim.softmax(dim=-1) * allowed.any(dim=-1, keepdim=True)
    else:
        attn = sim.softmax(dim=-1)
    out = torch.einsum('bhgij,bhjd->bhgid', attn, values)
    return out.reshape(b, hq, i, values.shape[-1]), attn.reshape(b, hq, i, j)
