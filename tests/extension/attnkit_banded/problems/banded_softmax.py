"""Spec: softmax over a sliding window of keys (a throwaway problem of the extension test)."""
import torch

from attnkit.model.roles import Arg, Out
from attnkit.model.spec import Method, Mistake, Problem


def _inputs(cfg, gen):
    return [2.0 * torch.randn(cfg["B"], cfg["Tq"], cfg["Tk"], generator=gen, dtype=torch.float64)]


PROBLEM = Problem(
    id="banded_softmax",
    title="Banded softmax",
    summary="Softmax over the last `window` keys up to each query's own position.",
    symbol="banded_softmax",
    points={"shapes": 1, "weight_sums": 1, "parity_float64": 2, "repeatable": 1},
    hints=("Build keep[i, j] = 0 <= i + (Tk - Tq) - j < window, fill the rest with a very negative number, softmax, "
           "then multiply by keep.",),
    methods=(
        Method(
            signature="def banded_softmax(scores, window=None):",
            statement="weights[b, i, j] = softmax over allowed j of scores[b, i, j]; key j is allowed for query i when "
                      "0 <= i + (Tk - Tq) - j < window (every key when window is None).",
            args=(Arg("scores", "(B, Tq, Tk) float tensor", "scores"),
                  Arg("window", "None or an int w >= 1: how many keys up to the query's own position", "window")),
            returns=(Out("weights", "(B, Tq, Tk), same dtype and device as scores", "weights"),),
        ),
    ),
    inputs=_inputs,
    mistakes=(
        Mistake("window_too_wide", "the window keeps one key too many (<= window instead of < window)",
                (("keep = (back >= 0) & (back < window)", "keep = (back >= 0) & (back <= window)"),),
                explain="key j is allowed when 0 <= i + (Tk - Tq) - j < window: window keys in all, the query's own "
                        "position included.",
                hint="use back < window."),
    ),
    track="warm-up",
)
