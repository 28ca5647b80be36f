"""Spec: masked softmax."""
import torch

from ..spec import LENS_DOC, SCORE_BOUND, Method, Mistake, Problem


def _inputs(cfg, gen):
    return [2.0 * torch.randn(cfg["B"], cfg["Tq"], cfg["Tk"], generator=gen, dtype=torch.float64)]


def _amplify(args, state, variant):
    args[0].mul_(SCORE_BOUND / args[0].abs().max())  # the largest |score| is exactly 1e4


FILL = "torch.finfo(scores.dtype).min"
LAST = "return torch.softmax(filled, dim=-1) * keep"
MISTAKES = (
    Mistake("wrong_axis", "softmax over the wrong axis",
            (("softmax(scores, dim=-1)", "softmax(scores, dim=1)"), ("softmax(filled, dim=-1)", "softmax(filled, dim=1)"))),
    Mistake("fill_zero", "masked scores filled with 0 instead of a very negative number", ((FILL, "0.0"),)),
    Mistake("mask_after_softmax", "mask applied after the softmax without renormalising",
            ((LAST, "return torch.softmax(scores, dim=-1) * keep"),)),
    Mistake("off_by_one", "lengths off by one (j <= valid_len)", (("< lens[..., None]", "<= lens[..., None]"),)),
    Mistake("lens_2d_ignored", "2-D valid_lens (B, Tq) not handled",
            (("lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]", "lens = valid_lens[:, None]"),)),
    Mistake("no_max_subtraction", "exp without subtracting the row maximum (overflow)",
            ((LAST, "return filled.exp() / filled.exp().sum(-1, keepdim=True) * keep"),)),
    Mistake("nan_rows", "-inf fill without a guard: fully masked rows become NaN", ((FILL, 'float("-inf")'),)),
    Mistake("uniform_rows", "fully masked rows left uniform instead of zero", ((LAST, "return torch.softmax(filled, dim=-1)"),)),
    Mistake("in_place", "scores modified in place", (("scores.masked_fill(", "scores.masked_fill_("),)),
    Mistake("lens_ignored", "valid_lens ignored", (("if valid_lens is None:", "if True:"),)),
)


PROBLEM = Problem(
    id="masked_softmax",
    title="Masked softmax",
    summary="Softmax over the keys that each query may see; masked keys get exactly 0.",
    symbol="masked_softmax",
    points={
        "shapes": 1, "weight_sums": 3, "parity_float64": 2, "parity_float32": 1, "gradients": 2,
        "masking": 2, "stability": 2, "side_effects": 1, "cuda": 1, "cuda_half": 1,
    },
    hints=(
        "Build a boolean mask of shape (B, Tq, Tk) from valid_lens with torch.arange(Tk) < lens[..., None]; "
        "a (B,) length applies to every query of its batch row, so give it a Tq axis of size 1.",
        "Replace masked scores by a very negative number before the softmax (not 0: exp(0) is not small), "
        "then set masked weights to exactly 0 afterwards so that a row with valid_len 0 is all zeros, not uniform.",
        "weights = torch.softmax(scores.masked_fill(~mask, torch.finfo(scores.dtype).min), dim=-1) * mask; "
        "with valid_lens None it is a plain softmax over the last axis.",
    ),
    methods=(
        Method(
            signature="def masked_softmax(scores, valid_lens=None):",
            statement=(
                "Softmax over the last axis, over valid key positions only.\n\n"
                "weights[b, i, j] = exp(scores[b, i, j]) / sum over valid j' of exp(scores[b, i, j'])\n"
                "for valid j, and exactly 0 for masked j. A row with valid_len 0 is all zeros\n"
                "(never NaN, never uniform). Finite for scores of magnitude 1e4 in float32.\n"
                "Do not modify scores in place; stay differentiable with respect to scores."
            ),
            args=(("scores", "(B, Tq, Tk) float tensor"), ("valid_lens", LENS_DOC)),
            returns=(("weights", "(B, Tq, Tk), same dtype and device as scores"),),
        ),
    ),
    inputs=_inputs,
    amplify=_amplify,
    mistakes=MISTAKES,
)
