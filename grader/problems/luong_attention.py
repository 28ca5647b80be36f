"""Spec: Luong attention (dot, scaled_dot, general, concat)."""
from ..model.spec import Method, Mistake, Problem
from ..model.spec import SCORE_BOUND
from ._common import (
    FORWARD_ARGS, FORWARD_SIGNATURE, OUTPUT_AND_WEIGHTS, MODULE_IMPORTS, WEIGHTS_RULES, dropout_mistakes,
    qkv_inputs, scale_scorer,
)

MODES = ("dot", "scaled_dot", "general", "concat")


def _fit(cfg, variant):
    return {**cfg, "dk": cfg["dq"]} if variant["score"] in ("dot", "scaled_dot") else cfg


def _ctor(c):
    kw = {"query_dim": c["dq"], "key_dim": c["dk"], "score": c["score"]}
    if c["score"] == "concat":
        kw["attn_dim"] = c["h"]
    return {**kw, "dropout": c.get("dropout", 0.0)}


def _params(c):
    if c["score"] == "general":
        return {"W_a.weight": (c["dq"], c["dk"])}
    if c["score"] == "concat":
        return {"W_a.weight": (c["h"], c["dq"] + c["dk"]), "v_a.weight": (1, c["h"])}
    return {}


def _amplify(args, state, cfg):
    """Scale so that the largest |score| is exactly 1e4."""
    mode = cfg["score"]
    if mode == "concat":
        scale_scorer("v_a.weight")(args, state, cfg)
        return
    q, k = args[0], args[1]
    keys = k @ state["W_a.weight"].T if mode == "general" else k
    scores = q @ keys.transpose(1, 2) / (k.shape[-1] ** 0.5 if mode == "scaled_dot" else 1.0)
    factor = (SCORE_BOUND / scores.abs().max()) ** 0.5
    q.mul_(factor)
    (state["W_a.weight"] if mode == "general" else k).mul_(factor)


PAIRS = "[queries.unsqueeze(2).expand(-1, -1, Tk, -1), keys.unsqueeze(1).expand(-1, Tq, -1, -1)]"
MISTAKES = (
    Mistake("general_wrong_side", "general: W_a applied to the queries instead of the keys",
            (("self.W_a = nn.Linear(key_dim, query_dim, bias=False)", "self.W_a = nn.Linear(query_dim, key_dim, bias=False)"),
             ("queries @ self.W_a(keys).transpose(1, 2)", "self.W_a(queries) @ keys.transpose(1, 2)")),
            explain='general multiplies W_a with the keys: q_i . (W_a k_j), W_a = nn.Linear(key_dim, query_dim). Putting W_a on the queries gives it the wrong shape (and the wrong math when the weights are copied in).',
            hint='self.W_a = nn.Linear(key_dim, query_dim, bias=False); scores = queries @ W_a(keys)^T.'),
    Mistake("no_scaling", "scaled_dot not scaled", (("scores = scores / self.key_dim**0.5", "scores = scores"),),
            explain='scaled_dot must divide by sqrt(key_dim); without it the scores grow with the dimension and the softmax saturates.',
            hint='scores = queries @ keys^T / math.sqrt(key_dim).'),
    Mistake("scale_by_d", "scaled_dot divided by key_dim instead of sqrt(key_dim)",
            (("scores / self.key_dim**0.5", "scores / self.key_dim"),),
            explain='The scores were divided by key_dim instead of sqrt(key_dim).',
            hint='Use math.sqrt(key_dim) (or key_dim ** 0.5).'),
    Mistake("concat_order", "concat: key first instead of query first",
            ((PAIRS, "[keys.unsqueeze(1).expand(-1, Tq, -1, -1), queries.unsqueeze(2).expand(-1, -1, Tk, -1)]"),),
            explain='concat scores v_a . tanh(W_a [q_i ; k_j]) with the query first; putting the key first pairs the wrong columns of W_a with each input.',
            hint='torch.cat([q expanded, k expanded], dim=-1): queries first.'),
    Mistake("concat_no_tanh", "concat: tanh missing", (("self.v_a(torch.tanh(self.W_a(pairs)))", "self.v_a(self.W_a(pairs))"),),
            explain='concat applies tanh between W_a and v_a; without it the scorer is linear.',
            hint='scores = v_a(torch.tanh(W_a(pairs))).squeeze(-1).'),
    Mistake("dot_no_dim_check", "dot accepts query_dim != key_dim",
            (('if score in ("dot", "scaled_dot") and query_dim != key_dim:', "if False:"),),
            explain='dot and scaled_dot need query_dim == key_dim; the constructor must raise ValueError instead of failing later in forward.',
            hint="In __init__: if score in ('dot', 'scaled_dot') and query_dim != key_dim: raise ValueError(...)."),
    Mistake("unknown_score_accepted", "an unknown score is not rejected", (("if score not in modes:", "if False:"),),
            explain='An unknown score was accepted silently.',
            hint='Validate score first and raise ValueError naming the valid choices (dot, scaled_dot, general, concat).'),
    Mistake("lens_ignored", "valid_lens ignored",
            (("masked_softmax(scores, valid_lens)", "masked_softmax(scores, None)"),),
            explain='valid_lens never reaches the softmax: padded keys get weight.',
            hint='Pass valid_lens to masked_softmax(scores, valid_lens).'),
) + dropout_mistakes('torch.bmm(self.dropout(weights), values)', 'self.dropout(torch.bmm(weights, values))')


PROBLEM = Problem(
    id="luong_attention",
    title="Luong attention",
    summary="Four scoring functions (dot, scaled_dot, general, concat) behind one module.",
    symbol="LuongAttention",
    points={
        "parameters": 3, "shapes": 1, "weight_sums": 2, "parity_float64": 4, "parity_float32": 1,
        "gradients": 2, "masking": 2, "stability": 1, "side_effects": 1, "dropout": 1, "cuda": 1, "cuda_half": 1,
    },
    hints=(
        "Validate `score` in __init__ and create only the parameters that mode needs. dot and scaled_dot "
        "compare q and k directly, so they need query_dim == key_dim; concat needs attn_dim.",
        "dot: queries @ keys^T, (B, Tq, dq) @ (B, dk, Tk) -> (B, Tq, Tk). scaled_dot divides by sqrt(key_dim). "
        "general transforms the keys: queries @ W_a(keys)^T. concat pairs every query with every key, query first.",
        "concat: pairs = torch.cat([queries.unsqueeze(2).expand(-1, -1, Tk, -1), "
        "keys.unsqueeze(1).expand(-1, Tq, -1, -1)], dim=-1); scores = self.v_a(torch.tanh(self.W_a(pairs))).squeeze(-1)",
    ),
    class_doc="Luong attention with a choice of scoring function.",
    methods=(
        Method(
            signature='def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):',
            statement=(
                "Pick the scoring function by `score` and create only that mode's parameters:\n\n"
                "score      scores[b, i, j]                  parameters (no biases)\n"
                "dot        q_i . k_j                        none; query_dim != key_dim raises ValueError\n"
                "scaled_dot q_i . k_j / sqrt(key_dim)        none; same dimension rule\n"
                "general    q_i . (W_a k_j)                  W_a = nn.Linear(key_dim, query_dim, bias=False)\n"
                "concat     v_a . tanh(W_a [q_i ; k_j])      W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False),\n"
                "                                            v_a = nn.Linear(attn_dim, 1, bias=False);\n"
                "                                            attn_dim=None raises ValueError\n"
                "Any other score raises ValueError naming the valid choices."
            ),
            args=(
                ("query_dim", "dq"), ("key_dim", "dk"), ("score", "one of " + ", ".join(MODES)),
                ("attn_dim", "h (concat only)"), ("dropout", "probability, 0.0 by default"),
            ),
        ),
        Method(
            signature=FORWARD_SIGNATURE,
            statement="scores (B, Tq, Tk) as chosen by `score`;\n" + WEIGHTS_RULES,
            args=FORWARD_ARGS,
            returns=OUTPUT_AND_WEIGHTS,
        ),
    ),
    imports=MODULE_IMPORTS,
    requires=("masked_softmax",),
    ctor=_ctor,
    ctor_required=2,
    variants=tuple({"score": m} for m in MODES),
    fit=_fit,
    params=_params,
    inputs=qkv_inputs,
    options={  # each check's options (the check units in judge/checks/ declare them)
        "stability": {"amplify": _amplify},
        "parameters": {"errors": (
        ({"query_dim": 4, "key_dim": 6, "score": "dot"}, "dot with query_dim != key_dim", ()),
        ({"query_dim": 4, "key_dim": 6, "score": "scaled_dot"}, "scaled_dot with query_dim != key_dim", ()),
        ({"query_dim": 4, "key_dim": 6, "score": "concat", "attn_dim": None}, "concat with attn_dim=None", ()),
        ({"query_dim": 4, "key_dim": 4, "score": "bilinear"}, "an unknown score", MODES),
        ({"query_dim": 4, "key_dim": 4, "score": "DOT"}, "a score in other letters", MODES),  # no other spelling
    )},
    },
    mistakes=MISTAKES,
    track="scoring",
    after=("additive_attention",),
)
