"""A boolean mask (True = attend) that broadcasts to the weights (..., Tq, Tk), in every broadcastable form."""
from __future__ import annotations

from . import MaskRule, register
from .layout import lens_to_mask, make_lens, score_shape


class BooleanMask(MaskRule):
    role = "mask"
    doc = "a boolean mask broadcastable to the weights, True = attend"
    kinds = ("none", "batch", "query", "random", "causal", "keys", "inner", "inner1")
    words = {"none": "mask=None", "batch": "key padding masks (B, 1, .., Tk)", "query": "per-query masks (B, .., Tq, Tk)",
             "random": "masks of the weights' full shape", "causal": "causal (Tq, Tk) masks", "keys": "1-D (Tk,) masks",
             "inner": "masks without the batch dim (e.g. (H, Tq, Tk))", "inner1": "masks with a leading 1 (1, H, Tq, Tk)",
             "inner_tied": "masks without the batch dim where B equals the next dim ((H, Tq, Tk) with H = B: the shape "
                           "a per-batch (B, Tq, Tk) mask would have)",
             "keys_tied": "1-D (Tk,) masks where Tq == Tk (the length a per-query column would have)"}
    symptoms = {frozenset({"inner"}): "mask_3d_as_batch", frozenset({"inner_tied"}): "mask_3d_as_batch",
                frozenset({"inner", "inner_tied"}): "mask_3d_as_batch"}
    ambiguous = {"inner": (0, 1), "keys": (-2, -1)}  # (H, Tq, Tk) vs (B, Tq, Tk); (Tk,) vs a (Tq,) column
    lengths = True
    spelled_out = "a mask that broadcasts over queries and the same mask expanded to every query"

    def forms(self, problem, cfg=None):
        """inner1 needs room for its extra leading dim."""
        if cfg is not None and len(score_shape(problem, cfg)) < 3:
            return tuple(k for k in self.kinds if k != "inner1")
        return self.kinds

    def make(self, problem, kind, cfg, gen, low=0):
        """A key padding mask (batch: (B, 1, .., 1, Tk)), per-query lengths (query: (B, 1, .., Tq, Tk)), an
        independent draw per weight row (random: the full shape; with low=0 one row has no allowed key), a causal
        (Tq, Tk) mask, one (Tk,) row for every query (keys), or a draw shared by the batch (inner: the weights' shape
        without its first dim, e.g. (H, Tq, Tk); inner1: the same with a leading 1)."""
        import torch

        from .causal import causal_mask

        if kind == "none":
            return None
        if kind in ("batch", "query"):
            return lens_to_mask(problem, cfg, make_lens(kind, cfg, gen, low))
        shape = score_shape(problem, cfg)
        if kind == "causal":
            return causal_mask(cfg["Tq"], cfg["Tk"])
        shape = {"keys": shape[-1:], "inner": shape[1:] if len(shape) > 2 else shape,
                 "inner1": (1, *shape[1:])}.get(kind, shape)
        if kind == "keys":  # one row for every query: no empty row unless every row is empty
            mask = torch.rand(shape, generator=gen) < 0.6
            mask[int(torch.randint(shape[-1], (1,), generator=gen))] = True
            return mask
        mask = torch.rand(shape, generator=gen) < 0.6
        mask.view(-1, shape[-1])[:, int(torch.randint(shape[-1], (1,), generator=gen))] |= low > 0
        if low == 0:
            mask.view(-1, shape[-1])[-1] = False
        return mask

    def allowed(self, problem, cfg, arg, call=None):
        return super().allowed(problem, cfg, arg, call) if arg is None else arg

    def from_lengths(self, problem, cfg, lens, spell_out=False):
        mask = lens_to_mask(problem, cfg, lens)
        return mask.expand(mask.shape[:-2] + (cfg["Tq"], cfg["Tk"])).clone() if spell_out else mask

    def example(self, problem, cfg):
        import torch

        return lens_to_mask(problem, cfg, torch.tensor([cfg["Tk"], 2])).tolist()


register(BooleanMask())
