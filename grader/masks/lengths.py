"""valid_lens: None, (B,) or (B, Tq) integers; key j is allowed for a query when j < its valid length."""
from __future__ import annotations

from . import MaskRule, register
from .layout import lens_to_mask, make_lens


class Lengths(MaskRule):
    role = "lengths"
    doc = "valid_lens: key j is allowed for a query when j < valid_len"
    kinds = ("none", "batch", "query")
    words = {"none": "valid_lens=None", "batch": "(B,) valid_lens", "query": "(B, Tq) valid_lens",
             "query_tied": "(B, Tq) valid_lens where B == Tq (the shape of their transpose)"}
    ambiguous = {"query": (0, -2)}
    symptoms = {frozenset({"query"}): "lens_2d_ignored"}
    lengths = True
    spelled_out = "valid_lens of shape (B,) and the same lengths repeated as (B, Tq)"

    def make(self, problem, kind, cfg, gen, low=0):
        return make_lens(kind, cfg, gen, low)

    def allowed(self, problem, cfg, arg, call=None):
        return super().allowed(problem, cfg, arg, call) if arg is None else lens_to_mask(problem, cfg, arg)

    def from_lengths(self, problem, cfg, lens, spell_out=False):
        return lens

    def example(self, problem, cfg):
        return [cfg["Tk"], 2]


register(Lengths())
