"""GQA one key/value head at a time, its query heads folded into the query axis."""
import torch


def grouped_query_attention(queries, keys, values, mask=None):
    B, Hq, Tq, d = queries.shape
    Hkv = keys.shape[1]
    if Hkv == 0 or Hq % Hkv:
        raise ValueError("Hq must be a multiple of Hkv")
    G = Hq // Hkv
    weights, outputs = [], []
    for h in range(Hkv):
        q = queries[:, h * G:(h + 1) * G].reshape(B, G * Tq, d)
        s = (q @ keys[:, h].transpose(1, 2) / d ** 0.5).reshape(B, G, Tq, -1)
        if mask is not None:
            m = mask.expand(B, Hq, Tq, s.shape[-1])[:, h * G:(h + 1) * G]
            s = s.masked_fill(~m, -1e300 if s.dtype == torch.float64 else torch.finfo(s.dtype).min)
            w = torch.softmax(s, -1).masked_fill(~m, 0.0)
        else:
            w = torch.softmax(s, -1)
        weights.append(w)
        outputs.append((w.reshape(B, G * Tq, -1) @ values[:, h]).reshape(B, G, Tq, -1))
    return torch.cat(outputs, 1), torch.cat(weights, 1)
