"""Spec: additive (Bahdanau) attention."""
from ..model.spec import Method, Mistake, Problem
from ._common import (
    FORWARD_ARGS, FORWARD_SIGNATURE, OUTPUT_AND_WEIGHTS, MODULE_IMPORTS, WEIGHTS_RULES, dropout_mistakes,
    qkv_inputs, scale_scorer,
)

FEATURES = "torch.tanh(self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1))"
RETURN = "return torch.bmm(self.dropout(weights), values), weights"
MISTAKES = (
    Mistake("no_tanh", "tanh missing around the summed projections", ((FEATURES, "self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1)"),),
            explain='Without tanh, w_v . (W_q q + W_k k) splits into a query-only and a key-only term; the query term is the same for every key, so the softmax only sees the keys: the scorer cannot compare q with k. A tanh around one of the two terms alone gives exactly the same weights: it must wrap their sum.',
            hint='Apply torch.tanh to W_q q_i + W_k k_j before w_v.'),
    Mistake("tanh_after_w_v", "tanh applied after w_v instead of before",
            ((FEATURES, "self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1)"),
             ("self.w_v(features)", "torch.tanh(self.w_v(features))")),
            explain='tanh belongs inside, on the (B, Tq, Tk, h) features; applied to the scores it squashes them into (-1, 1) and the scorer stays linear.',
            hint='scores = w_v(tanh(W_q q + W_k k)), not tanh(w_v(W_q q + W_k k)).'),
    Mistake("weights_on_keys", "weights applied to the keys instead of the values",
            ((RETURN, "return torch.bmm(self.dropout(weights), keys), weights"),),
            explain='The attention weights multiply the keys instead of the values.',
            hint='output = dropout(weights) @ values; keys only enter the scores.'),
    Mistake("lens_ignored", "valid_lens ignored", (("masked_softmax(scores, valid_lens)", "masked_softmax(scores, None)"),),
            explain='valid_lens never reaches the softmax: padded keys get weight.',
            hint='Pass valid_lens to masked_softmax(scores, valid_lens).'),
    Mistake("weights_after_dropout", "weights returned after dropout",
            ((RETURN, "weights = self.dropout(weights)\n        return torch.bmm(weights, values), weights"),),
            explain='The returned weights went through dropout: in train() they are scaled by 1/(1-p) and partly zeroed, so they no longer sum to 1.',
            hint='Keep the softmax output for the return value; apply dropout only to the copy that multiplies the values.'),
    Mistake("dropout_in_eval", "dropout active in eval() mode",
            ((RETURN, "return torch.bmm(nn.functional.dropout(weights, self.dropout.p, training=True), values), weights"),),
            explain='Dropout stays active in eval() mode (e.g. F.dropout without training=self.training), so evaluation is random.',
            hint='Use an nn.Dropout module, or F.dropout(x, p, training=self.training).'),
    Mistake("extra_bias", "a bias in W_q", (("nn.Linear(query_dim, attn_dim, bias=False)", "nn.Linear(query_dim, attn_dim)"),),
            explain='A parameter the contract does not have (here a bias): names and shapes must be exactly W_q.weight, W_k.weight, w_v.weight.',
            hint='Create the three nn.Linear layers with bias=False and nothing else.'),
    Mistake("query_key_swapped", "queries and keys broadcast on the wrong axes (scores transposed)",
            ((FEATURES, "torch.tanh(self.W_q(queries).unsqueeze(1) + self.W_k(keys).unsqueeze(2))"),),
            explain="Queries and keys were broadcast on each other's axes, so the scores come out as (B, Tk, Tq) instead of (B, Tq, Tk).",
            hint='W_q(queries).unsqueeze(2) is (B, Tq, 1, h); W_k(keys).unsqueeze(1) is (B, 1, Tk, h).'),
) + dropout_mistakes('torch.bmm(self.dropout(weights), values)', 'self.dropout(torch.bmm(weights, values))')


PROBLEM = Problem(
    id="additive_attention",
    title="Additive (Bahdanau) attention",
    summary="scores = w_v . tanh(W_q q + W_k k), masked softmax, weighted sum of values.",
    symbol="AdditiveAttention",
    points={
        "parameters": 2, "shapes": 1, "weight_sums": 2, "parity_float64": 3, "parity_float32": 1,
        "gradients": 2, "masking": 2, "stability": 1, "side_effects": 1, "dropout": 1, "cuda": 1, "cuda_half": 1,
    },
    hints=(
        "Project once, then broadcast: W_q(queries) is (B, Tq, h) and W_k(keys) is (B, Tk, h); "
        "unsqueeze them to (B, Tq, 1, h) and (B, 1, Tk, h) so that their sum is (B, Tq, Tk, h).",
        "tanh goes on that sum, before w_v; w_v maps h to 1, so squeeze the last axis to get scores (B, Tq, Tk). "
        "Reuse masked_softmax (relative import) and multiply the weights with values, not keys.",
        "features = torch.tanh(self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1)); "
        "scores = self.w_v(features).squeeze(-1); weights = masked_softmax(scores, valid_lens); "
        "return torch.bmm(self.dropout(weights), values), weights",
    ),
    class_doc="Additive attention: scores[b, i, j] = w_v . tanh(W_q q_i + W_k k_j).",
    methods=(
        Method(
            signature="def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):",
            statement=(
                "Create exactly these parameters (no biases) and a dropout of probability `dropout`:\n"
                "W_q = nn.Linear(query_dim, attn_dim, bias=False)  maps queries to h\n"
                "W_k = nn.Linear(key_dim, attn_dim, bias=False)    maps keys to h\n"
                "w_v = nn.Linear(attn_dim, 1, bias=False)          maps h to one score"
            ),
            args=(("query_dim", "dq"), ("key_dim", "dk"), ("attn_dim", "h"), ("dropout", "probability, 0.0 by default")),
        ),
        Method(
            signature=FORWARD_SIGNATURE,
            statement="scores[b, i, j] = w_v . tanh(W_q q_i + W_k k_j), shape (B, Tq, Tk);\n" + WEIGHTS_RULES,
            args=FORWARD_ARGS,
            returns=OUTPUT_AND_WEIGHTS,
        ),
    ),
    imports=MODULE_IMPORTS,
    requires=("masked_softmax",),
    ctor=lambda c: {"query_dim": c["dq"], "key_dim": c["dk"], "attn_dim": c["h"], "dropout": c.get("dropout", 0.0)},
    ctor_required=3,
    params=lambda c: {"W_q.weight": (c["h"], c["dq"]), "W_k.weight": (c["h"], c["dk"]), "w_v.weight": (1, c["h"])},
    inputs=qkv_inputs,
    options={  # each check's options (the check units in judge/checks/ declare them)
        "stability": {"amplify": scale_scorer("w_v.weight")},
    },
    mistakes=MISTAKES,
    track="scoring",
)
