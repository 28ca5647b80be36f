"""Spec: additive attention under a memory bound (the interviewer's follow-up question)."""
import torch

from ..model.roles import Arg
from ..model.spec import LENS_DOC, SCORE_BOUND, Method, Mistake, Problem
from ._common import FORWARD_ARGS, OUTPUT_AND_WEIGHTS

STEP = "step = max_elements // h  # triples per chunk: a chunk's features are (step, h)"
CHECK = "if max_elements < h:"
MISTAKES = (
    Mistake("full_tensor", "the full (B, Tq, Tk, h) tensor is built anyway (one chunk for everything)",
            ((STEP, "step = pairs"),),
            explain="max_elements is the point of the exercise: with one chunk the features are (B*Tq*Tk, h), exactly "
                    "the tensor the chunking must avoid.",
            hint="Chunk size in (b, i, j) triples = max_elements // h, so each chunk's features fit the bound."),
    Mistake("step_ignores_h", "chunks of max_elements triples: the features are h times too big",
            ((STEP, "step = max_elements"),),
            explain="Each (b, i, j) triple carries h features, so a chunk of n triples allocates n * h elements.",
            hint="step = max_elements // h."),
    Mistake("last_chunk_dropped", "the last, partial chunk is dropped",
            (("for start in range(0, pairs, step):", "for start in range(0, pairs - pairs % step, step):"),),
            explain="When the number of triples is not a multiple of the chunk size, the last chunk is shorter; "
                    "skipping it loses those scores.",
            hint="range(0, pairs, step) and slice each chunk up to min(start + step, pairs)."),
    Mistake("clamped_instead_of_raising", "max_elements < h is clamped instead of rejected",
            ((CHECK, "if False:"), (STEP, "step = max(1, max_elements // h)")),
            explain="Below h not even one (query, key) pair's features fit the bound: the contract wants ValueError, "
                    "not a silent overrun.",
            hint="if max_elements < h: raise ValueError(...)."),
    Mistake("per_chunk_softmax", "softmax taken inside each chunk: chunks are not normalised together",
            (("scores.append(features @ w_v[0])", "scores.append(torch.softmax(features @ w_v[0], 0))"),),
            explain="A softmax normalises over all the keys of a query; normalising each chunk on its own gives "
                    "weights that are not those of the full softmax.",
            hint="Collect the raw scores of every chunk (or keep running maxima and sums), then normalise once."),
    Mistake("no_tanh", "tanh missing around the summed projections", (("torch.tanh(q[b * Tq + i] + k[b * Tk + j])", "(q[b * Tq + i] + k[b * Tk + j])"),),
            explain="Without tanh the scorer is linear: w_v . (W_q q + W_k k) splits into a query term and a key term. A tanh around one of the two terms alone gives exactly the same weights: it must wrap their sum.",
            hint="features = torch.tanh(W_q q_i + W_k k_j)."),
    Mistake("lens_ignored", "valid_lens ignored", (("masked_softmax(torch.cat(scores).reshape(B, Tq, Tk), valid_lens)",
                                                   "masked_softmax(torch.cat(scores).reshape(B, Tq, Tk), None)"),),
            explain="valid_lens never reaches the softmax: padded keys get weight.",
            hint="masked_softmax(scores, valid_lens)."),
    Mistake('lens_2d_ignored', '(B, Tq) valid_lens ignored: only (B,) lengths mask',
            (('masked_softmax(torch.cat(scores).reshape(B, Tq, Tk), valid_lens)', 'masked_softmax(torch.cat(scores).reshape(B, Tq, Tk), valid_lens if valid_lens is None or valid_lens.dim() == 1 else None)'),),
            explain='valid_lens may be (B,) (one length per batch row) or (B, Tq) (one per query); the per-query form was dropped, so its calls attend to every key.',
            hint='Accept both: lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens; mask key j of query i where j >= lens[b, i].'),
    Mistake("weights_on_keys", "weights applied to the keys instead of the values",
            (("return torch.bmm(weights, values), weights", "return torch.bmm(weights, keys), weights"),),
            explain="The attention weights multiply the values; keys only enter the scores.",
            hint="output = weights @ values."),
    Mistake("in_place", "w_v squeezed in place", (("features @ w_v[0]", "features @ w_v.squeeze_(0)"),),
            explain="squeeze_ changes the caller's w_v (and fails on a tensor that requires grad).",
            hint="w_v[0] or w_v.squeeze(0): out of place."),
)


def _inputs(cfg, gen):
    """queries, keys, values standard normal; W_q (h, dq), W_k (h, dk), w_v (1, h) in nn.Linear's range."""
    B, Tq, Tk, h = cfg["B"], cfg["Tq"], cfg["Tk"], cfg["h"]

    def linear(*shape):
        return (torch.rand(*shape, generator=gen, dtype=torch.float64) * 2 - 1) / shape[-1] ** 0.5

    qkv = [torch.randn(*s, generator=gen, dtype=torch.float64) for s in ((B, Tq, cfg["dq"]), (B, Tk, cfg["dk"]), (B, Tk, cfg["dv"]))]
    return qkv + [linear(h, cfg["dq"]), linear(h, cfg["dk"]), linear(1, h)]


def _amplify(args, state, cfg):
    """|score| <= sum |w_v| because |tanh| < 1: scale w_v so that bound is exactly 1e4."""
    args[5].mul_(SCORE_BOUND / args[5].abs().sum())


def allowed(cfg, args, max_elements) -> int:
    """max(max_elements, S): S is the largest input, B*Tq*Tk, B*Tq*dv, B*Tq*h or B*Tk*h."""
    B, Tq, Tk, dv, h = cfg["B"], cfg["Tq"], cfg["Tk"], cfg["dv"], cfg["h"]
    inputs = [a.numel() for a in args if isinstance(a, torch.Tensor)]
    return max(max_elements, *inputs, B * Tq * Tk, B * Tq * dv, B * Tq * h, B * Tk * h)


def full_tensor(cfg) -> int:
    """Elements of the (B, Tq, Tk, h) tensor the problem is about avoiding."""
    return cfg["B"] * cfg["Tq"] * cfg["Tk"] * cfg["h"]


def _blocks(cfg):
    """max_elements for chunks of 3 (b, i, j) triples and of 3 rows of queries or keys, counted per batch row
    or across the batch (whichever way a learner divides max_elements), and h + 1: each leaves a partial last
    block on config 0 (B = 2, Tq and Tk primes >= 5)."""
    B, Tq, Tk, h = cfg["B"], cfg["Tq"], cfg["Tk"], cfg["h"]
    sizes = dict.fromkeys((h + 1, 3 * h, 3 * Tk * h, 3 * B * Tk * h, 3 * Tq * h, 3 * B * Tq * h))
    return tuple({"max_elements": m} for m in sizes)


def _memory(cfg, args):
    """The smallest legal bound (h) and each block setting, wherever the full tensor exceeds what it allows,
    so that every measured call can catch it."""
    bounds = dict.fromkeys((cfg["h"], 2 * cfg["h"] + 1, *(b["max_elements"] for b in _blocks(cfg))))
    return [({"max_elements": m}, allowed(cfg, args, m)) for m in bounds if full_tensor(cfg) > allowed(cfg, args, m)]


BACKSTOP = {
    "dims": {"B": 1, "Tq": 256, "Tk": 256, "h": 128, "dq": 8, "dk": 8, "dv": 8, "H": 1},
    "args": {"max_elements": 2**16},
    "allowed": lambda cfg, args: allowed(cfg, args, 2**16),
    "resident_kb": 16 * 1024,
    "held_kb": 24 * 1024,
    "rows": 32,
}
"""The full tensor here is 2**23 float32 elements (32 MB); a chunked solution needs a few MB (measured: 4 MB growth and at
most 13 MB held by the worker beforehand, its own inputs and heap). The grader measures the call from outside the worker
(its memory cgroup, run/cgroup.py): growing by more than half the full tensor, or holding three quarters of it when the
call begins (allocated in advance), means it was built, however it was hidden. Its values are compared on 32 seeded query
rows (the reference computes those alone: additive attention's rows are independent, and this call has no mask)."""


def _memory_fit(cfg):
    """h >= 6 (and dims <= 8): with Tq >= 5 and Tk >= 2, B*Tq*Tk*h then exceeds every input and S."""
    return {**cfg, "h": max(cfg["h"], 6)}


PROBLEM = Problem(
    id="chunked_additive_attention",
    title="Memory-bounded additive attention",
    summary="Additive attention computed in chunks: no tensor above max(max_elements, S) elements.",
    symbol="chunked_additive_attention",
    points={"value_errors": 1, "shapes": 1, "weight_sums": 1, "parity_float64": 3, "parity_float32": 1,
            "gradients": 2, "masking": 2, "stability": 1, "side_effects": 1, "memory": 3,
            "capabilities": 1, "cuda": 1, "cuda_half": 1},
    hints=(
        "The big tensor is tanh(W_q q_i + W_k k_j) for every (b, i, j): B*Tq*Tk*h elements. Project once (W_q "
        "queries is only (B, Tq, h)), then build the features for a chunk of (b, i, j) triples at a time.",
        "A chunk of n triples allocates n*h elements, so n = max_elements // h (at least 1 when max_elements >= h; "
        "raise ValueError below that). Keep each chunk's scores (n,), not its features; the scores (B, Tq, Tk) fit S.",
        "for start in range(0, B*Tq*Tk, n): idx = torch.arange(start, min(start + n, B*Tq*Tk)); b, i, j = idx // (Tq*Tk), "
        "idx // Tk % Tq, idx % Tk; scores.append(torch.tanh(q[b, i] + k[b, j]) @ w_v[0]). Then masked_softmax once.",
    ),
    methods=(
        Method(
            signature="def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):",
            statement=(
                "The result of AdditiveAttention in eval() mode (scores = w_v . tanh(W_q q_i + W_k k_j), masked\n"
                "softmax, weights @ values), with the weights given as tensors in nn.Linear layout, without ever\n"
                "building the full (B, Tq, Tk, h) tensor: during the call no tensor an operation allocates (views\n"
                "and in-place results aside) may exceed max(max_elements, S) elements, S the largest of any input,\n"
                "B*Tq*Tk, B*Tq*dv, B*Tq*h, B*Tk*h. max_elements < h raises ValueError; any larger value must work.\n"
                "Gradients flow to every input, weights included."
            ),
            args=FORWARD_ARGS[:3] + (
                Arg("W_q", "(h, dq)", "parameter"), Arg("W_k", "(h, dk)", "parameter"), Arg("w_v", "(1, h)", "parameter"),
                Arg("valid_lens", LENS_DOC, "lengths"), Arg("max_elements", "the allocation bound, in elements (>= h)", "scalar")),
            returns=OUTPUT_AND_WEIGHTS,
        ),
    ),
    imports="import torch\n\nfrom .masked_softmax import masked_softmax\n",
    requires=("masked_softmax",),
    inputs=_inputs,
    trailing=lambda cfg: [3 * cfg["h"] + 1],
    mistakes=MISTAKES,
    options={  # each check's options (the check units in judge/checks/ declare them)
        "memory": {
            "calls": _memory,
            "fit": _memory_fit,
            "words": {"bound": "max(max_elements, S)", "tensor": "the full (B, Tq, Tk, h) tensor",
                      "advice": "Build the (B, Tq, Tk, h) features a chunk at a time, with chunks of at most max_elements "
                                "elements"},
            "backstop": BACKSTOP,
        },
        "parity_float64": {"blocks": _blocks},
        "stability": {"amplify": _amplify},
        "value_errors": {"calls": lambda cfg: (({"max_elements": cfg["h"] - 1}, "max_elements < h", ()),)},
    },
    traced=False,  # the learner chooses the chunks: their stages are not the reference's
    track="memory",
    after=('additive_attention',),
)
