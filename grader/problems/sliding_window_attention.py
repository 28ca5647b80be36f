"""Spec: causal sliding-window attention with attention sinks (Mistral, StreamingLLM), section 17 of the serving stage."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import Method, Mistake, Problem
from ._common import LLM_BANNED, QKV, amplify_qk, lead_fit, lead_inputs, negative_qk

WINDOW = "((k_pos[None, :] > q_pos[:, None] - window)"
LO = "lo = max(q0 + shift - window + 1, 0)"
SINKS = "sinks = min(num_sinks, lo)"
SINK_RULE = "| (k_pos[None, :] < num_sinks))"
FILL = "filled = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)"
MASKED = "weights = torch.softmax(filled, dim=-1) * allowed"
SCORES = "scores = (q @ k.transpose(-2, -1)) / d**0.5"

MISTAKES = (
    Mistake("window_off_by_one", "the window one key too wide: j >= pos - window instead of j > pos - window",
            ((WINDOW, "((k_pos[None, :] >= q_pos[:, None] - window)"), (LO, "lo = max(q0 + shift - window, 0)")),
            explain="A window of w keys is the query itself and the w - 1 keys before it: j > pos(i) - w. With >= each "
                    "query sees w + 1 keys (Mistral's window counts the query; some blog code does not).",
            hint="allowed = (j <= pos) & (j > pos - window); window = 1 is the query alone."),
    Mistake("top_left", "positions aligned to the top left (pos(i) = i) instead of the bottom right",
            (("shift = Tk - Tq", "shift = 0"),),
            explain="With Tq != Tk the queries are the last Tq of the Tk positions (decoding after a prefill): pos(i) = "
                    "i + Tk - Tq. Aligned to the top left, every query looks at keys too early in the sequence; the two "
                    "agree only when Tq == Tk.",
            hint="pos(i) = i + (Tk - Tq); the window is pos - window < j <= pos."),
    Mistake("sinks_ignored", "the sinks never attended (a plain sliding window)",
            ((SINKS, "sinks = 0"), (SINK_RULE, ")")),
            explain="StreamingLLM keeps the first num_sinks tokens visible to every later query, whatever the window: "
                    "they are where the softmax puts its spare attention, and dropping them is what breaks long runs.",
            hint="allowed = (j <= pos) & ((j > pos - window) | (j < num_sinks))."),
    Mistake("sinks_counted_twice", "a sink inside the window attended twice (once as a sink, once in the window)",
            ((SINKS, "sinks = min(num_sinks, hi)"),
             (SINK_RULE, "| ((k_pos[None, :] < num_sinks) & (torch.arange(len(k_pos), device=k_pos.device) < sinks)[None, :]))")),
            explain="A key that is both a sink and in the window is one key: it gets one score in the softmax. Taking "
                    "the sinks and the window as two lists of keys, where they overlap, counts it twice and gives it "
                    "twice the weight.",
            hint="Take the sinks before the window only: keys[..., :min(num_sinks, lo)] and then keys[..., lo:hi]."),
    Mistake("sinks_ahead", "sinks attended even by queries before them (the causal rule not applied to sinks)",
            (("allowed = (k_pos[None, :] <= q_pos[:, None]) & (", "allowed = (k_pos[None, :] < num_sinks) | ("),
             (SINK_RULE, "& (k_pos[None, :] <= q_pos[:, None]))")),
            explain="Sinks are earlier tokens: a query at position 0 sees key 0 only, even with 4 sinks. The causal rule "
                    "j <= pos(i) holds for every key, sinks included; it matters for the first num_sinks positions and "
                    "when Tq > Tk.",
            hint="allowed = (j <= pos) & ((j > pos - window) | (j < num_sinks))."),
    Mistake("full_scores", "the full (Tq, Tk) score matrix with a mask (one block for everything)",
            (("    outs = []\n", "    outs = []\n    block_size = max(Tq, 1)\n"), (LO, "lo = 0"),
             ("hi = max(min(q0 + shift + bq, Tk), lo)", "hi = Tk")),
            explain="The values are right, but a sliding window exists so that each query costs window + sinks keys, "
                    "not Tk: the (Tq, Tk) scores, or a (Tq, Tk) boolean mask, are what it saves.",
            hint="Take block_size queries at a time, and for them only the keys they can see: the range lo..hi of at "
                 "most block_size + window - 1 keys, and the sinks before it."),
    Mistake("no_scaling", "scores not scaled by 1/sqrt(d)", ((SCORES, "scores = q @ k.transpose(-2, -1)"),),
            explain="Scores are q . k / sqrt(d): without it they grow with d and the softmax saturates.",
            hint="scores = q @ k^T / sqrt(d), d = queries.shape[-1]."),
    Mistake("scale_by_dv", "scaled by the values' feature size instead of d",
            ((SCORES, "scores = (q @ k.transpose(-2, -1)) / values.shape[-1] ** 0.5"),),
            explain="d is the size of the vectors being dotted (queries and keys), not of the values.",
            hint="d = queries.shape[-1]."),
    Mistake("queries_scaled_in_place", "the queries scaled in place (q *= d ** -0.5 on a slice of the input)",
            (("        bq = q.shape[-2]\n", "        bq = q.shape[-2]\n        q *= d**-0.5\n"),
             (SCORES, "scores = q @ k.transpose(-2, -1)")),
            explain="queries[..., q0:q0 + block_size, :] is a view of the caller's tensor: scaling it in place changes the "
                    "caller's queries (and autograd refuses an in-place change of a view of a leaf that needs its "
                    "gradient).",
            hint="q = queries[..., q0:q0 + block_size, :] * d ** -0.5 makes a new tensor; or divide the scores."),
    Mistake("empty_rows_nan", "rows with no allowed key come out NaN (-inf fill, no guard)",
            ((FILL, 'filled = scores.masked_fill(~allowed, float("-inf"))'),
             (MASKED, "weights = torch.softmax(filled, dim=-1)")),
            explain="With Tq > Tk the first Tq - Tk queries have pos(i) < 0 and no key at all: the softmax of a row of "
                    "-inf is 0/0 = NaN. Their output must be 0.",
            hint="Fill with torch.finfo(dtype).min and multiply the weights by the mask (or zero those rows)."),
    Mistake("empty_rows_uniform", "rows with no allowed key come out as a mean of values (the finite fill, not zeroed)",
            ((MASKED, "weights = torch.softmax(filled, dim=-1)"),),
            explain="With Tq > Tk the first Tq - Tk queries have pos(i) < 0 and no key at all. A finite fill keeps their "
                    "softmax free of NaN, but every entry of such a row is the same fill, so the softmax spreads the row "
                    "evenly over the keys it was given: a mean of values, where the output must be 0.",
            hint="Multiply the weights by the mask (weights = softmax(filled) * allowed), or zero the rows with no "
                 "allowed key."),
    Mistake("last_block_dropped", "the last, partial block of queries dropped",
            (("for q0 in range(0, Tq, block_size):", "for q0 in range(0, Tq - block_size + 1, block_size):"),
             ("return torch.cat(outs, dim=-2)",
              "return torch.cat(outs + [values.new_zeros(*values.shape[:-2], Tq - sum(o.shape[-2] for o in outs), "
              "values.shape[-1])], dim=-2)")),
            explain="When block_size does not divide Tq the last block is shorter; a loop over whole blocks only never "
                    "reaches the last queries (their rows stay as the output was allocated, zeros).",
            hint="for q0 in range(0, Tq, block_size): queries[..., q0:q0 + block_size, :] (slicing stops at Tq)."),
    Mistake("cat_wrong_axis", "the blocks' outputs concatenated along the feature axis instead of the query axis",
            (("return torch.cat(outs, dim=-2)", "return torch.cat(outs, dim=-1)"),),
            explain="Each block answers block_size query rows: the blocks stack along the query axis (-2), giving "
                    "(..., Tq, dv). Along -1 they make (..., block_size, n_blocks * dv), which only looks right when one "
                    "block holds every query.",
            hint="torch.cat(outs, dim=-2)."),
    Mistake("window_not_checked", "window < 1 or num_sinks < 0 accepted",
            (("if window < 1 or num_sinks < 0 or block_size < 1:", "if block_size < 1:"),),
            explain="A window of 0 keys leaves a query nothing, not even itself, and a negative number of sinks means "
                    "nothing: the contract raises ValueError for both.",
            hint="if window < 1 or num_sinks < 0 or block_size < 1: raise ValueError(...)."),
)


def allowed_keys(Tq, Tk, window, num_sinks):
    """(Tq, Tk) bool: key j for query i when j <= pos(i) and (j > pos(i) - window or j < num_sinks), pos(i) = i + Tk - Tq."""
    pos = torch.arange(Tq)[:, None] + (Tk - Tq)
    j = torch.arange(Tk)[None, :]
    return (j <= pos) & ((j > pos - window) | (j < num_sinks))


def _fit(cfg, variant):
    """lead_fit's dims, the decoding step (one query) after at least window + num_sinks + 2 keys, so that a window
    that covers every query (window >= Tq) still leaves keys out (window < Tk)."""
    cfg = lead_fit(cfg, variant)
    return {**cfg, "Tk": max(cfg["Tk"], cfg["window"] + cfg["num_sinks"] + 2)} if cfg["Tq"] == 1 else cfg


def _trailing(cfg):
    """window, then num_sinks and block_size where they are not the defaults (so that the defaults are tested too)."""
    args = [cfg["window"], cfg["num_sinks"], cfg["block_size"]]
    while len(args) > 1 and args[-1] == (0, 64)[len(args) - 2]:
        args.pop()
    return args


def _named(call, names=("window", "num_sinks", "block_size"), defaults=(None, 0, 64)):
    got = list(call["args"][3:]) + list(defaults[len(call["args"]) - 3:])
    return dict(zip(names, got))


def _oracle(call):
    """F.scaled_dot_product_attention with the window's boolean mask spelled out, rows with no allowed key set to 0"""
    q, k, v = call["args"][:3]
    a = _named(call)
    mask = allowed_keys(q.shape[-2], k.shape[-2], a["window"], a["num_sinks"])
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return [torch.where(mask.any(-1)[:, None], out, torch.zeros_like(out))]


def _memory_fit(cfg):
    """Tq = Tk = 283 >= 4*L*(window + num_sinks + block_size) with L = 1 for every memory call, Tq > d = dv = 12 >
    1 + block_size/(window + num_sinks); a small block besides the default 64, one per variant's rank (5, 6 or 7:
    the last block partial), so that the configs the memory check draws per variant are one."""
    return {**cfg, "B": 1, "H": 1, "Tq": 283, "Tk": 283, "dq": 12, "dk": 12, "d": 12, "dv": 12,
            "window": 4, "num_sinks": 2, "block_size": 4, "small_block": 3 + cfg["rank"]}


def _memory(cfg, args):
    """Windows of 4 keys with 2 sinks and of 6 without, in seeded small blocks, and the default blocks of 64:
    max(S, L*Tq*(window + num_sinks + block_size)) elements."""
    L = args[0].numel() // (cfg["Tq"] * cfg["dq"])
    S = max(max(a.numel() for a in args[:3]), L * cfg["Tq"] * cfg["dv"])
    b = cfg["small_block"]
    return [({"window": w, "num_sinks": s, "block_size": block}, max(S, L * cfg["Tq"] * (w + s + block)))
            for w, s, block in ((4, 2, b), (6, 0, b), (4, 2, 64))]


BACKSTOP = {
    "dims": {"B": 1, "H": 1, "Tq": 8192, "Tk": 8192, "dq": 8, "dk": 8, "d": 8, "dv": 8},
    "args": {"window": 64, "num_sinks": 4, "block_size": 128},
    "allowed": lambda cfg, args: cfg["Tq"] * (64 + 4 + 128),
    "resident_kb": 64 * 1024,
    "held_kb": 96 * 1024,
}
"""A float32 call of 8192 queries whose full (Tq, Tk) scores take 256 MB (and a boolean mask of them 64 MB), measured
from outside the worker (run/cgroup.py); a block of 128 queries meets at most 4 + 128 + 63 keys."""

METAMORPHIC = {"Tq": 4, "Tk": 13, "window": 3, "num_sinks": 2, "block_size": 3}
"""Decoding after a prefill: the 4 queries sit at positions 9..12; keys 2..6 are in no query's window and no sink."""


def _outside(cfg):
    first = cfg["Tk"] - cfg["Tq"]
    return list(range(cfg["num_sinks"], first - cfg["window"] + 1))


RELATIONS = (
    {"id": "outside_every_window", "change": "keys, values", "positions": _outside, "same": True,
     "says": "a key in no query's window and not a sink is never attended: changing it (and its value) changes nothing"},
    {"id": "sink_seen_by_all", "change": "values", "positions": lambda cfg: [0],
     "rows": lambda cfg: torch.ones(cfg["Tq"], dtype=torch.bool),
     "says": "sink 0 is seen by every query at or after it, however far the window has moved: changing its value "
             "changes every row"},
    {"id": "newest_key", "change": "keys, values", "positions": lambda cfg: [cfg["Tk"] - 1],
     "rows": lambda cfg: torch.arange(cfg["Tq"]) == cfg["Tq"] - 1,
     "says": "the newest key is seen by the last query only (causal, aligned to the bottom right): changing it changes "
             "the last row and no other"},
)


PROBLEM = Problem(
    id="sliding_window_attention",
    title="Sliding-window attention with sinks",
    summary="Causal attention over the last `window` positions plus the first `num_sinks`, a block of queries at a time.",
    symbol="sliding_window_attention",
    points={"shapes": 1, "parity_float64": 3, "parity_float32": 1, "oracle": 2, "metamorphic": 2,
            "block_invariance": 1, "gradients": 1, "stability": 1, "side_effects": 1, "memory": 2, "value_errors": 1,
            "capabilities": 1, "cuda": 1, "cuda_half": 1},
    hints=(
        "Positions are aligned to the bottom right: query i sits at pos(i) = i + Tk - Tq. Key j is allowed when "
        "j <= pos(i) and either j > pos(i) - window (the window, the query included) or j < num_sinks (a sink).",
        "Take the queries block_size rows at a time. The rows q0 .. q0 + bq - 1 can see the keys lo = max(pos(q0) - "
        "window + 1, 0) .. hi = pos(last row), at most bq + window - 1 of them, and the sinks before lo: build the "
        "block's mask from those keys' positions only.",
        "k = cat(keys[..., :min(num_sinks, lo), :], keys[..., lo:hi + 1, :]) (likewise v), with their positions; "
        "scores = q @ k^T / sqrt(d); fill the disallowed with torch.finfo(dtype).min, softmax, multiply by the mask "
        "(a row with no allowed key, pos(i) < 0, stays 0), @ v; cat the blocks.",
    ),
    methods=(
        Method(
            signature="def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):",
            statement=(
                "Query i sits at pos(i) = i + Tk - Tq (aligned to the bottom right). Key j is allowed for it when\n"
                "j <= pos(i) and (j > pos(i) - window or j < num_sinks): the query itself, the window - 1 keys before\n"
                "it, and the sinks before it (a sink inside the window counts once). output = softmax(q k^T /\n"
                "sqrt(d)) v over the allowed keys, 0 on a row with no allowed key (only when Tq > Tk). Queries are\n"
                "taken block_size rows at a time, each block against the keys its rows can see: during the call no\n"
                "tensor an operation allocates has more than max(S, L*Tq*(window + num_sinks + block_size))\n"
                "elements (S the largest input or output, L the product of the leading dims). window < 1,\n"
                "num_sinks < 0 or block_size < 1 raises ValueError. Results do not depend on block_size beyond\n"
                "rounding. Do not call F.scaled_dot_product_attention."
            ),
            args=(Arg("queries", "(..., Tq, d)", "query"), Arg("keys", "(..., Tk, d)", "key"),
                  Arg("values", "(..., Tk, dv)", "value"),
                  Arg("window", "int >= 1: the query and the window - 1 keys before it", "scalar"),
                  Arg("num_sinks", "int >= 0: the first num_sinks keys, seen by every later query", "scalar"),
                  Arg("block_size", "queries per block (>= 1)", "scalar")),
            returns=(Out("output", "(..., Tq, dv)", "values"),),
        ),
    ),
    variants=({"rank": 3, "window": 3, "num_sinks": 1, "block_size": 64},
              {"rank": 4, "window": 1, "num_sinks": 0, "block_size": 64},
              {"rank": 2, "window": 2, "num_sinks": 3, "block_size": 3},
              {"rank": 3, "window": 16, "num_sinks": 2, "block_size": 1}),
    fit=_fit,
    inputs=lambda cfg, gen: lead_inputs(cfg, gen, *QKV),
    trailing=_trailing,
    negative=negative_qk,
    traced=False,  # the learner chooses its blocks and key ranges: its tensors are no stages of the reference's
    options={  # each check's options (the check units in judge/checks/ declare them)
        "memory": {
            "calls": _memory,
            "fit": _memory_fit,
            "backstop": BACKSTOP,
            "words": {"bound": "max(S, L*Tq*(window + num_sinks + block_size))",
                      "tensor": "the full (Tq, Tk) score matrix or mask, or every query's own window of keys",
                      "advice": "Take block_size queries at a time against the contiguous keys their rows can see and "
                                "the sinks before them; build the block's mask from those keys' positions"},
        },
        "metamorphic": {"relations": RELATIONS, "fit": lambda cfg: {**cfg, **METAMORPHIC}},
        "parity_float64": {"blocks": lambda cfg: tuple({"block_size": b} for b in (1, 2, 3, 5))},
        "stability": {"amplify": amplify_qk, "long": True, "long_args": {"window": 300}},  # key tiles of 128 in a block
        "value_errors": {"calls": lambda cfg: (({"window": 0}, "window = 0", ()), ({"num_sinks": -1}, "num_sinks = -1", ()),
                                               ({"block_size": 0}, "block_size = 0", ()), ({"block_size": -2}, "block_size = -2", ()))},
        # only the bounds (contract section 17: "window >= 1, num_sinks >= 0, block_size >= 1, else ValueError"): a
        # bool or a float is not said to raise there, as it is for local attention's window and ALiBi's num_heads, so
        # code that takes window=True as 1 is right, and so is code that refuses it
        "oracle": {"call": _oracle},
    },
    mistakes=MISTAKES,
    banned=LLM_BANNED,
    track="serving",
    after=("flash_attention",),
)
