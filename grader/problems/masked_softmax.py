"""Spec: masked softmax."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import LENS_DOC, SCORE_BOUND, Method, Mistake, Problem


def _inputs(cfg, gen):
    return [2.0 * torch.randn(cfg["B"], cfg["Tq"], cfg["Tk"], generator=gen, dtype=torch.float64)]


def _amplify(args, state, cfg):
    args[0].mul_(SCORE_BOUND / args[0].abs().max())  # the largest |score| is exactly 1e4


def _negative(args, state, cfg, to):
    """Every score in [to - 0.5, to + 0.5]: the valid ones far below the masked ones' fill of 0 (say)."""
    args[0].div_(2 * args[0].abs().max()).add_(to)


def _split(args, state, cfg, masked, lo, hi):
    """Masked keys' scores in [hi - 0.5, hi + 0.5], the others' in [lo - 0.5, lo + 0.5] (judge/checks/stability.py)."""
    unit = args[0].div_(2 * args[0].abs().max())
    args[0].copy_(torch.where(masked[:, None, :], unit + hi, unit + lo))


FILL = "torch.finfo(scores.dtype).min"
LAST = "return torch.softmax(filled, dim=-1) * keep"
MISTAKES = (
    Mistake("wrong_axis", "softmax over the wrong axis",
            (("softmax(scores, dim=-1)", "softmax(scores, dim=1)"), ("softmax(filled, dim=-1)", "softmax(filled, dim=1)")),
            explain="The softmax runs over queries (or batch) instead of over the keys, so rows do not sum to 1 over Tk and each key's weight depends on the other queries.",
            hint='Normalise over the last axis: torch.softmax(x, dim=-1).'),
    Mistake("fill_zero", "masked scores filled with 0 instead of a very negative number", ((FILL, "0.0"),),
            explain='Masked scores set to 0 still get weight exp(0) = 1 relative to the others: masked keys leak in and valid weights shrink.',
            hint='Fill masked scores with a very negative number (torch.finfo(scores.dtype).min) or -inf, not 0.'),
    Mistake("fill_1e4", "masked scores filled with -1e4 (BERT's constant) instead of the dtype's minimum",
            ((FILL, "-1e4"),),
            explain="-1e4 is a score the contract allows: where the valid scores lie near -1e4, a masked key filled "
                    "with -1e4 is no smaller than they are, takes a share of the weight before the mask zeroes it, and "
                    "the row no longer sums to 1.",
            hint="Fill with torch.finfo(scores.dtype).min, which no valid score reaches, then multiply by the mask."),
    Mistake("bias_too_small", "masked keys given an additive bias of -1e4 (BERT's extended mask) instead of a fill",
            (("filled = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)",
              "filled = scores + (~keep).to(scores.dtype) * -1e4"),),
            explain='Adding -1e4 only lowers a masked score by 1e4: a masked key whose score is ~1e4 above the valid ones '
                    '(inputs within the contract) still gets the most weight, and the row is wrong even if the weights '
                    'are multiplied by the mask afterwards.',
            hint='Replace masked scores instead of adding to them: scores.masked_fill(~keep, torch.finfo(scores.dtype).min), '
                 'then multiply by the mask.'),
    Mistake("nan_grad_empty_row", "a -inf additive mask cleaned after the softmax (nan_to_num): NaN gradients on a row "
            "with no valid key",
            (("filled = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)",
              "filled = scores + torch.zeros_like(scores).masked_fill(~keep, float('-inf'))"),
             (LAST, "return torch.nan_to_num(torch.softmax(filled, dim=-1)) * keep")),
            explain='On a row with valid_len == 0 every score is -inf, the softmax is 0/0 = NaN, and nan_to_num cleans only '
                    'the forward: the backward of that softmax is still NaN, and in training the NaN reaches every '
                    'parameter upstream (a padded batch is enough).',
            hint='Fill masked scores with a finite very negative number (torch.finfo(scores.dtype).min) and multiply by the '
                 'mask: no NaN in either pass.'),
    Mistake("mask_after_softmax", "mask applied after the softmax without renormalising",
            ((LAST, "return torch.softmax(scores, dim=-1) * keep"),),
            explain='The softmax ran over every key and the mask only zeroed the masked weights afterwards, so the valid weights no longer sum to 1.',
            hint='Mask before the softmax (fill masked scores with a very negative number), or renormalise after zeroing.'),
    Mistake("off_by_one", "lengths off by one (j <= valid_len)", (("< lens[..., None]", "<= lens[..., None]"),),
            explain='Key j is valid when j < valid_len; using <= (or valid_len - 1) lets one masked key in, or drops one valid key.',
            hint='Build the mask as torch.arange(Tk) < lens[..., None].'),
    Mistake("lens_2d_ignored", "2-D valid_lens (B, Tq) not handled",
            (("lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]", "lens = valid_lens[:, None]"),),
            explain='valid_lens of shape (B, Tq) gives one length per query; treating it like (B,) broadcasts it over the wrong axis or fails.',
            hint='For 2-D valid_lens use lens[..., None] directly; only a 1-D (B,) length needs an extra Tq axis: lens[:, None, None].'),
    Mistake("no_max_subtraction", "exp without subtracting the row maximum (overflow)",
            ((LAST, "return filled.exp() / filled.exp().sum(-1, keepdim=True) * keep"),),
            explain='exp(score) overflows to inf for large scores (float32 overflows above ~88), and inf/inf is NaN.',
            hint='Subtract the row maximum before exp, or simply call torch.softmax, which does it for you.'),
    Mistake("nan_rows", "-inf fill without a guard: fully masked rows become NaN", ((FILL, 'float("-inf")'),),
            explain='With -inf fills, a row whose keys are all masked is softmax of all -inf = 0/0 = NaN.',
            hint='After the softmax, zero rows with no valid key (torch.where(mask, weights, 0) or nan_to_num), or fill with a finite very negative number and multiply by the mask.'),
    Mistake("uniform_rows", "fully masked rows left uniform instead of zero", ((LAST, "return torch.softmax(filled, dim=-1)"),),
            explain='With a finite fill, a row whose keys are all masked becomes a uniform 1/Tk row instead of zeros.',
            hint='Multiply the weights by the mask after the softmax so that fully masked rows are exactly 0.'),
    Mistake("in_place", "scores modified in place", (("scores.masked_fill(", "scores.masked_fill_("),),
            explain="The function changed the caller's scores tensor (masked_fill_, index assignment or +=); the caller's data is corrupted and autograd may fail.",
            hint='Use the out-of-place forms: masked_fill (no underscore), torch.where, or clone first.'),
    Mistake("lens_ignored", "valid_lens ignored", (("if valid_lens is None:", "if True:"),),
            explain='valid_lens was not applied: padded keys get attention weight.',
            hint='When valid_lens is not None, build the mask and apply it before the softmax.'),
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
            args=(Arg("scores", "(B, Tq, Tk) float tensor", "scores"), Arg("valid_lens", LENS_DOC, "lengths")),
            returns=(Out("weights", "(B, Tq, Tk), same dtype and device as scores", "weights"),),
        ),
    ),
    inputs=_inputs,
    options={  # each check's options (the check units in judge/checks/ declare them)
        "stability": {"amplify": _amplify, "split": _split},
        "parity_float64": {"far": True},  # 8209 keys: positions past 2048 (an arange in float16 rounds there)
    },
    negative=_negative,
    mistakes=MISTAKES,
    track="warm-up",
    after=("numpy_additive_attention",),
)
