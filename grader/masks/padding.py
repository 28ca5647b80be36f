"""A key padding mask: None or boolean (B, Tk), True = attend, the same for every query (and head) of a batch row."""
from __future__ import annotations

from . import MaskRule, register
from .layout import score_shape


class KeyPadding(MaskRule):
    role = "key_padding"
    doc = "a boolean (B, Tk) mask of the keys, True = attend, the same for every query of a batch row"
    kinds = ("none", "batch", "prefix")
    per_query = "batch"  # it has no per-query form: every query of a row sees the same keys
    words = {"none": "memory_mask=None", "batch": "(B, S) memory masks with holes", "prefix": "(B, S) padding masks",
             "batch_tied": "(B, S) memory masks with holes where B == S (the shape of their transpose)"}
    ambiguous = {"batch": (0, -1)}
    lengths = True
    laid_out = True  # a mask of (B, Tk) is laid out against the scores by this rule, not by broadcasting

    def make(self, problem, kind, cfg, gen, low=0):
        """batch: each key kept with probability 0.6 (one per row kept where low > 0; with low=0 the last row keeps
        none); prefix: the first L keys of each row (lengths drawn as valid_lens (B,), with 0 and Tk)."""
        import torch

        from .layout import make_lens

        if kind == "none":
            return None
        if kind == "prefix":
            return torch.arange(cfg["Tk"]) < make_lens("batch", cfg, gen, low)[:, None]
        mask = torch.rand(cfg["B"], cfg["Tk"], generator=gen) < 0.6
        mask[:, int(torch.randint(cfg["Tk"], (1,), generator=gen))] |= low > 0
        if low == 0:
            mask[-1] = False
        return mask

    def allowed(self, problem, cfg, arg, call=None):
        """(B, Tk) laid out against the scores (B, 1.., 1, Tk)."""
        if arg is None:
            return super().allowed(problem, cfg, arg, call)
        n_lead = len(score_shape(problem, cfg)) - 2
        return arg.reshape(arg.shape[0], *[1] * n_lead, arg.shape[1])

    def from_lengths(self, problem, cfg, lens, spell_out=False):
        """(B,) lengths as the padding mask they mean; (B, Tq) lengths only where every query of a row has the same."""
        import torch

        if lens.dim() == 2:
            if not (lens == lens[:, :1]).all():
                raise ValueError("a key padding mask cannot give the queries of one row different keys")
            lens = lens[:, 0]
        return torch.arange(cfg["Tk"]) < lens[:, None]

    def example(self, problem, cfg):
        return [[True] * cfg["Tk"], [True, True] + [False] * (cfg["Tk"] - 2)]


register(KeyPadding())
