"""A causal flag: key j is allowed for query i when j <= i + (Tk - Tq) (aligned to the bottom right)."""
from __future__ import annotations

from . import MaskRule, register
from .layout import score_shape


def causal_mask(Tq: int, Tk: int):
    """(Tq, Tk) boolean, True = attend: key j for query i when j <= i + (Tk - Tq) (aligned bottom right)."""
    import torch

    return torch.ones(Tq, Tk, dtype=torch.bool).tril(Tk - Tq)


class Causal(MaskRule):
    role = "causal"
    doc = "a flag: key j is allowed for query i when j <= i + (Tk - Tq)"
    kinds = ("none", "causal")  # False (or the default) and True
    words = {"none": "is_causal=False", "causal": "is_causal=True",
             "query": "is_causal=True where Tq > Tk (rows with no allowed key), else False"}
    omit_default = True  # is_causal=False is also tested as the signature's default
    long = "causal"  # a long call is causal (the per-query form is not where Tq < Tk): queries past 64 meet the rule

    def make(self, problem, kind, cfg, gen, low=0):
        """True for "causal"; for the per-query form other checks draw ("query"), True where Tq > Tk (the causal
        rows that allow no key: float32, stability and device calls meet them too) and False elsewhere."""
        return kind == "causal" or (kind == "query" and cfg["Tq"] > cfg["Tk"])

    def allowed(self, problem, cfg, arg, call=None):
        shape = score_shape(problem, cfg)
        if not arg:
            return super().allowed(problem, cfg, arg, call)
        return causal_mask(shape[-2], shape[-1])

    def example(self, problem, cfg):
        return True


register(Causal())
