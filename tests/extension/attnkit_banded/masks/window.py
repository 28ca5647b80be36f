"""A sliding window: key j is allowed for query i when 0 <= (i + Tk - Tq) - j < window; None: every key."""
import torch

from attnkit.masks import MaskRule, register
from attnkit.masks.layout import score_shape


class Window(MaskRule):
    role = "window"
    doc = "a window size w: key j is allowed for query i when 0 <= i + (Tk - Tq) - j < w"
    kinds = ("none", "w1", "w3")
    words = {"none": "window=None", "w1": "window=1", "w3": "window=3"}
    per_query = "w3"
    per_batch = "w3"

    def make(self, problem, kind, cfg, gen, low=0):
        return None if kind == "none" else int(kind[1:])

    def allowed(self, problem, cfg, arg, call=None):
        shape = score_shape(problem, cfg)
        if arg is None:
            return torch.ones(shape, dtype=torch.bool)
        Tq, Tk = shape[-2], shape[-1]
        back = torch.arange(Tq)[:, None] + (Tk - Tq) - torch.arange(Tk)[None, :]  # (Tq, Tk): how far back key j is
        return (back >= 0) & (back < arg)

    def example(self, problem, cfg):
        return 2


register(Window())
