"""FlashAttention 2's backward: recompute P block by block from each row's log-sum-exp, accumulate dK and dV
over query blocks and dQ over key blocks."""
import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False, block=3):
    Tq, Tk, d = queries.shape[-2], keys.shape[-2], queries.shape[-1]
    wide = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    q, k, v, do = (t.to(wide) for t in (queries, keys, values, grad_output))
    scale = d ** -0.5
    qi = torch.arange(Tq, device=q.device)[:, None]

    def scores(k0):
        s = q @ k[..., k0:k0 + block, :].transpose(-1, -2) * scale
        if is_causal:
            kj = torch.arange(k0, min(k0 + block, Tk), device=q.device)[None, :]
            s = s.masked_fill(kj > qi + Tk - Tq, float("-inf"))
        return s

    lse = torch.full(q.shape[:-1], float("-inf"), dtype=wide, device=q.device)
    for k0 in range(0, Tk, block):
        lse = torch.logaddexp(lse, torch.logsumexp(scores(k0), -1))
    live = torch.isfinite(lse)
    lse_safe = torch.where(live, lse, torch.zeros_like(lse))
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=wide, device=q.device)
    for k0 in range(0, Tk, block):
        out = out + torch.exp(scores(k0) - lse_safe[..., None]) @ v[..., k0:k0 + block, :]
    delta = (do * out).sum(-1)
    dq = torch.zeros_like(q)
    dks, dvs = [], []
    for k0 in range(0, Tk, block):
        p = torch.exp(scores(k0) - lse_safe[..., None])
        dvs.append(p.transpose(-1, -2) @ do)
        ds = p * (do @ v[..., k0:k0 + block, :].transpose(-1, -2) - delta[..., None])
        dq = dq + ds @ k[..., k0:k0 + block, :] * scale
        dks.append(ds.transpose(-1, -2) @ q * scale)
    return dq.to(queries.dtype), torch.cat(dks, -2).to(keys.dtype), torch.cat(dvs, -2).to(values.dtype)
