"""Spec: one Bahdanau decoder step in NumPy (the warm-up)."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import SCORE_BOUND, Method, Mistake, Problem

STABLE = "e = e - e.max()  # exp of the largest score is 1: no overflow"
MISTAKES = (
    Mistake("no_max_subtraction", "softmax without subtracting the maximum (overflows)", ((STABLE, "e = e"),),
            explain="np.exp(e) overflows to inf once e_j passes ~88 (float32) or ~709 (float64), and inf / inf is NaN.",
            hint="Subtract e.max() before np.exp: softmax(e) = softmax(e - c) for any constant c."),
    Mistake("imports_torch", "the module imports torch",
            (("import numpy as np", "import numpy as np\nimport torch  # noqa: F401"),),
            explain="This step is the NumPy warm-up: the module may not import torch, not even unused (an interviewer's "
                    "machine may not have it).",
            hint="Delete every `import torch` and use NumPy only: np.tanh, np.exp, @."),
    Mistake("no_tanh", "tanh missing around the summed projections", (("np.tanh(W_a @ s_prev + h @ U_a.T)", "(W_a @ s_prev + h @ U_a.T)"),),
            explain="Without tanh, v_a . (W_a s + U_a h_j) splits into a term that is the same for every j and a "
                    "linear one: the decoder state no longer changes which encoder step wins. A tanh around one of the two terms alone gives exactly the same weights: it must wrap their sum.",
            hint="e_j = v_a . tanh(W_a s_prev + U_a h_j)."),
    Mistake("not_normalised", "exp(e) used as the weights without dividing by its sum",
            (("alpha = weights / weights.sum()", "alpha = weights"),),
            explain="alpha must be a probability distribution over the T encoder steps: exp(e) / sum(exp(e)).",
            hint="alpha = np.exp(e) / np.exp(e).sum()."),
    Mistake('softmax_wrong_axis', 'softmax over an axis of size 1 (each weight normalised alone: every alpha is 1)',
            (('alpha = weights / weights.sum()', 'alpha = weights / weights'),),
            explain='With the scores kept as a (T, 1) column, a softmax over the last axis normalises each score by itself: every weight is 1, the weights sum to T and the context is the sum of the encoder states.',
            hint='Keep e as a (T,) vector (or use axis=0): alpha = exp(e - e.max()) / exp(e - e.max()).sum().'),
    Mistake("sum_instead_of_v_a", "features summed instead of scored with v_a", (("e = features @ v_a", "e = features.sum(1)"),),
            explain="v_a weighs the d features of tanh(...) into one score; summing them treats every feature alike.",
            hint="e = np.tanh(...) @ v_a, shape (T,)."),
    Mistake("context_not_summed", "context left as the weighted encoder states (T, n_h), not summed over T",
            (("return alpha @ h, alpha", "return alpha[:, None] * h, alpha"),),
            explain="The context is one vector: the alpha-weighted sum of the T encoder states, shape (n_h,).",
            hint="context = alpha @ h (or (alpha[:, None] * h).sum(0))."),
    Mistake("fixed_float64", "float32 inputs computed and returned in float64",
            (("weights = np.exp(e)", "weights = np.exp(e.astype(np.float64))"),),
            explain="The outputs must keep the inputs' dtype; a cast to float64 (or a float64 constant array) "
                    "promotes everything after it.",
            hint="Do not cast: NumPy keeps float32 when every operand is float32."),
    Mistake("unweighted_context", "context is the plain mean of the encoder states", (("return alpha @ h, alpha", "return h.mean(0), alpha"),),
            explain="The context must weigh each encoder state h_j by its attention weight alpha_j.",
            hint="context = alpha @ h."),
)


def _inputs(cfg, gen):
    """s_prev (n_s,), h (T, n_h) standard normal; W_a (d, n_s), U_a (d, n_h), v_a (d,) in nn.Linear's range."""
    T, n_s, n_h, d = cfg["T"], cfg["n_s"], cfg["n_h"], cfg["d"]

    def linear(*shape):
        return (torch.rand(*shape, generator=gen, dtype=torch.float64) * 2 - 1) / shape[-1] ** 0.5

    return [torch.randn(n_s, generator=gen, dtype=torch.float64), torch.randn(T, n_h, generator=gen, dtype=torch.float64),
            linear(d, n_s), linear(d, n_h), linear(d)]


def _amplify(args, state, cfg):
    """|e_j| <= sum |v_a| because |tanh| < 1: scale v_a so that bound is exactly 1e4."""
    args[4].mul_(SCORE_BOUND / args[4].abs().sum())


def _negative(args, state, cfg, to):
    """Every e_j near `to` (|to| <= 1e4): W_a s_prev = 20 in each of the d features and |U_a h_j| < 1 there, so each
    tanh is within 1e-15 of 1, and v_a = to / d: e_j = sum(v_a) * (1 - tiny), their differences below float64's ulp."""
    s, h, W, U, v = args
    W.copy_(20.0 * torch.outer(torch.ones(W.shape[0], dtype=W.dtype), s) / s.dot(s))
    U.mul_(0.5 / max((h @ U.T).abs().max().item(), 1e-12))
    v.fill_(to / v.numel())


PROBLEM = Problem(
    id="numpy_additive_attention",
    title="Additive attention in NumPy",
    summary="One Bahdanau decoder step with NumPy alone: scores, a stable softmax, the context vector.",
    symbol="additive_attention_step",
    points={"no_torch": 2, "shapes": 1, "weight_sums": 1, "parity_float64": 3, "parity_float32": 1,
            "stability": 1, "side_effects": 1},
    hints=(
        "Score all T encoder steps at once: W_a @ s_prev is (d,), h @ U_a.T is (T, d); their sum broadcasts "
        "to (T, d). tanh, then @ v_a gives e, shape (T,).",
        "A stable softmax subtracts the maximum first: np.exp(e - e.max()) never overflows, and the result is the "
        "same. The context is the alpha-weighted sum of the rows of h.",
        "e = np.tanh(W_a @ s_prev + h @ U_a.T) @ v_a; w = np.exp(e - e.max()); alpha = w / w.sum(); "
        "return alpha @ h, alpha",
    ),
    methods=(
        Method(
            signature="def additive_attention_step(s_prev, h, W_a, U_a, v_a):",
            statement=(
                "One decoder step of Bahdanau attention, in NumPy only (the module must not import torch):\n"
                "e_j = v_a . tanh(W_a s_prev + U_a h_j) for each encoder step j;\n"
                "alpha = softmax(e), finite for |e_j| up to 1e4; context = alpha @ h.\n"
                "Both come back as NumPy arrays of the inputs' dtype (float32 or float64); inputs are not modified."
            ),
            args=(Arg("s_prev", "(n_s,)", "query"), Arg("h", "(T, n_h)", "key"), Arg("W_a", "(d, n_s)", "parameter"),
                  Arg("U_a", "(d, n_h)", "parameter"), Arg("v_a", "(d,)", "parameter")),
            returns=(Out("context", "(n_h,)", "values"), Out("alpha", "(T,)", "weights")),
        ),
    ),
    imports="import numpy as np\n",
    fit=lambda cfg, variant: {**cfg, "T": cfg["Tk"], "n_s": cfg["dq"], "n_h": cfg["dv"], "d": cfg["h"]},
    inputs=_inputs,
    negative=_negative,
    options={  # each check's options (the check units in judge/checks/ declare them)
        "stability": {"amplify": _amplify},
    },
    mistakes=MISTAKES,
    track="warm-up",
)
