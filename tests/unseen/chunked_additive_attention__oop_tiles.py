"""STYLE: heavily object-oriented (a tiling plan class, a score-buffer class, a masking helper class)
BUG: The score buffer is allocated with torch.zeros(...) without a dtype, so float64 scores are stored and softmaxed in float32.
STAGE: scores
WHEN: float64 inputs: ~1e-7 relative for O(1) scores, ~1e-4 when scores share a large common offset (~3e3, e.g. saturated tanh features with w_v entries ~1e3); float32 is exact.
"""
import torch


class _TilePlan:
    """Chooses a (batch, query, key) tile whose features (nb, ni, nj, h) fit in max_elements."""

    def __init__(self, B, Tq, Tk, h, max_elements):
        if max_elements < h:
            raise ValueError(f"max_elements={max_elements} must be at least h={h}")
        budget = max_elements // h  # (b, i, j) triples per tile
        self.nj = min(Tk, budget)
        self.ni = min(Tq, max(1, budget // self.nj))
        self.nb = min(B, max(1, budget // (self.ni * self.nj)))
        self.B, self.Tq, self.Tk = B, Tq, Tk

    def tiles(self):
        for b0 in range(0, self.B, self.nb):
            for i0 in range(0, self.Tq, self.ni):
                for j0 in range(0, self.Tk, self.nj):
                    yield (slice(b0, b0 + self.nb), slice(i0, i0 + self.ni), slice(j0, j0 + self.nj))


class _ScoreBuffer:
    def __init__(self, B, Tq, Tk, device):
        self.scores = torch.zeros(B, Tq, Tk, device=device)

    def write(self, tile, block):
        b, i, j = tile
        self.scores[b, i, j] = block


class _LengthMask:
    def __init__(self, valid_lens, Tk, device):
        self.keep = None
        if valid_lens is not None:
            lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
            self.keep = torch.arange(Tk, device=device) < lens[..., None]

    def softmax(self, scores):
        if self.keep is None:
            return torch.softmax(scores, dim=-1)
        filled = scores.masked_fill(~self.keep, torch.finfo(scores.dtype).min)
        return torch.softmax(filled, dim=-1) * self.keep


class _AdditiveScorer:
    def __init__(self, W_q, W_k, w_v):
        self.W_q, self.W_k, self.w_v = W_q, W_k, w_v

    def project(self, queries, keys):
        return queries @ self.W_q.T, keys @ self.W_k.T  # (B, Tq, h), (B, Tk, h)

    def score(self, q_tile, k_tile):
        features = torch.tanh(q_tile[:, :, None, :] + k_tile[:, None, :, :])  # (nb, ni, nj, h)
        return features @ self.w_v[0]  # (nb, ni, nj)


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    plan = _TilePlan(B, Tq, Tk, W_q.shape[0], max_elements)
    scorer = _AdditiveScorer(W_q, W_k, w_v)
    q, k = scorer.project(queries, keys)
    buffer = _ScoreBuffer(B, Tq, Tk, queries.device)
    for tile in plan.tiles():
        b, i, j = tile
        buffer.write(tile, scorer.score(q[b, i], k[b, j]))
    weights = _LengthMask(valid_lens, Tk, queries.device).softmax(buffer.scores).to(values.dtype)
    return torch.bmm(weights, values), weights
