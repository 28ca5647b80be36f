"""Spec: additive (Bahdanau) attention."""
from ..spec import Method, Mistake, Problem
from ._common import FORWARD_ARGS, FORWARD_SIGNATURE, MODULE_IMPORTS, WEIGHTS_RULES, qkv_inputs, scale_scorer

FEATURES = "torch.tanh(self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1))"
RETURN = "return torch.bmm(self.dropout(weights), values), weights"
MISTAKES = (
    Mistake("no_tanh", "tanh missing", ((FEATURES, "self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1)"),)),
    Mistake("tanh_after_w_v", "tanh applied after w_v instead of before",
            ((FEATURES, "self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1)"),
             ("self.w_v(features)", "torch.tanh(self.w_v(features))"))),
    Mistake("weights_on_keys", "weights applied to the keys instead of the values",
            ((RETURN, "return torch.bmm(self.dropout(weights), keys), weights"),)),
    Mistake("lens_ignored", "valid_lens ignored", (("masked_softmax(scores, valid_lens)", "masked_softmax(scores, None)"),)),
    Mistake("weights_after_dropout", "weights returned after dropout",
            ((RETURN, "weights = self.dropout(weights)\n        return torch.bmm(weights, values), weights"),)),
    Mistake("dropout_in_eval", "dropout active in eval() mode",
            ((RETURN, "return torch.bmm(nn.functional.dropout(weights, self.dropout.p, training=True), values), weights"),)),
    Mistake("extra_bias", "a bias in W_q", (("nn.Linear(query_dim, attn_dim, bias=False)", "nn.Linear(query_dim, attn_dim)"),)),
    Mistake("query_key_swapped", "queries and keys broadcast on the wrong axes (scores transposed)",
            ((FEATURES, "torch.tanh(self.W_q(queries).unsqueeze(1) + self.W_k(keys).unsqueeze(2))"),)),
)


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
            returns=(("output", "(B, Tq, dv)"), ("weights", "(B, Tq, Tk)")),
        ),
    ),
    imports=MODULE_IMPORTS,
    requires=("masked_softmax",),
    ctor=lambda c: {"query_dim": c["dq"], "key_dim": c["dk"], "attn_dim": c["h"], "dropout": c.get("dropout", 0.0)},
    ctor_required=3,
    params=lambda c: {"W_q.weight": (c["h"], c["dq"]), "W_k.weight": (c["h"], c["dk"]), "w_v.weight": (1, c["h"])},
    inputs=qkv_inputs,
    amplify=scale_scorer("w_v.weight"),
    mistakes=MISTAKES,
    outputs=("output", "weights"),
)
