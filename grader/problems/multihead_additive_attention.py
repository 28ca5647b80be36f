"""Spec: multi-head additive attention."""
from ..model.roles import Out
from ..model.spec import Method, Mistake, Problem
from ._common import (
    FORWARD_ARGS, FORWARD_SIGNATURE, MODULE_IMPORTS,
    concat_no_transpose, dropout_mistakes, qkv_inputs, scale_scorer,
)

RETURN = "return self.W_o(context.transpose(1, 2).reshape(B, Tq, -1)), weights"
MISTAKES = (
    Mistake("weights_averaged", "weights averaged over heads instead of returned per head",
            ((RETURN, "return self.W_o(context.transpose(1, 2).reshape(B, Tq, -1)), weights.mean(1)"),),
            explain='The returned weights were averaged over heads; the contract returns them per head, (B, H, Tq, Tk).',
            hint='Return the (B, H, Tq, Tk) weights as they are.'),
    Mistake("heads_no_transpose", "heads split by a reshape without transpose (head and time axes mixed)",
            (("self.W_q(queries).view(B, Tq, H, self.attn_dim).transpose(1, 2)", "self.W_q(queries).view(B, H, Tq, self.attn_dim)"),
             ("self.W_k(keys).view(B, Tk, H, self.attn_dim).transpose(1, 2)", "self.W_k(keys).view(B, H, Tk, self.attn_dim)")),
            explain='(B, T, H*h) was reshaped straight to (B, H, T, h): that mixes time steps and heads. The head axis must be split off the feature axis first.',
            hint='x.view(B, T, H, h).transpose(1, 2), not x.view(B, H, T, h).'),
    Mistake("heads_split_strided", "heads split in the wrong order: head n takes every H-th feature",
            (("self.W_q(queries).view(B, Tq, H, self.attn_dim).transpose(1, 2)",
              "self.W_q(queries).view(B, Tq, self.attn_dim, H).permute(0, 3, 1, 2)"),
             ("self.W_k(keys).view(B, Tk, H, self.attn_dim).transpose(1, 2)",
              "self.W_k(keys).view(B, Tk, self.attn_dim, H).permute(0, 3, 1, 2)")),
            explain="Head n owns the contiguous block of features n*h:(n+1)*h; splitting the last axis as "
                    "(h, H) gives head n every H-th feature instead.",
            hint="Split the feature axis as (H, h): x.view(B, T, H, h), then move H forward."),
    Mistake("shared_w_v", "one w_v shared by all heads",
            (("self.w_v[None, :, None, None, :]", "self.w_v[:1][None, :, None, None, :]"),),
            explain='Every head used the same scorer vector; head n must use its own w_v[n].',
            hint='Multiply features (B, H, Tq, Tk, h) with w_v[None, :, None, None, :] and sum over h.'),
    Mistake("concat_wrong_order", "head contexts concatenated feature-major instead of head-major",
            ((RETURN, "return self.W_o(context.permute(0, 2, 3, 1).reshape(B, Tq, -1)), weights"),),
            explain="The head contexts were concatenated feature-major; the contract concatenates head after head: [head 0's dv features, head 1's, ...].",
            hint='context (B, H, Tq, dv).transpose(1, 2).reshape(B, Tq, H * dv).'),
    Mistake("lens_wrong_order", "per-head lengths repeated in batch order instead of interleaved",
            (("valid_lens.repeat_interleave(H, dim=0)", "valid_lens.repeat(H, *[1] * (valid_lens.dim() - 1))"),),
            explain='Lengths were repeated per head in the wrong order: repeat() tiles the batch (b0, b1, b0, b1) while (B, H) flattened to B*H is (b0, b0, b1, b1).',
            hint='valid_lens.repeat_interleave(H, dim=0) matches scores.reshape(B * H, Tq, Tk).'),
    Mistake("lens_ignored", "valid_lens ignored", (("lens = None if valid_lens is None else", "lens = None if True else"),),
            explain='valid_lens never reaches the softmax: padded keys get weight.',
            hint='Pass the per-head lengths to masked_softmax.'),
    Mistake("no_tanh", "tanh missing around the summed projections", (("torch.tanh(q.unsqueeze(3) + k.unsqueeze(2))", "(q.unsqueeze(3) + k.unsqueeze(2))"),),
            explain='tanh is missing between the summed projections and w_v: the scorer is linear. A tanh around one of the two terms alone gives exactly the same weights: it must wrap their sum.',
            hint='features = torch.tanh(q_head + k_head).'),
    Mistake("extra_bias", "a bias in W_o",
            (("nn.Linear(num_heads * value_dim, value_dim, bias=False)", "nn.Linear(num_heads * value_dim, value_dim)"),),
            explain="The contract's parameters have no biases: W_q, W_k and W_o are bias-free, and an extra parameter "
                    "changes both the parameter list and the output.",
            hint="self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)."),
    Mistake("fixed_dtype", "scores cast to float32 (.float()), whatever the inputs' dtype",
            (("scores = (features * self.w_v[None, :, None, None, :]).sum(-1)",
              "scores = (features * self.w_v[None, :, None, None, :]).sum(-1).float()"),),
            explain="A hard-coded dtype (.float(), dtype=torch.float32) loses float64 precision and returns weights "
                    "of the wrong dtype; with float16 inputs it breaks the next matmul.",
            hint="Keep the inputs' dtype: no .float(); create tensors with dtype=x.dtype or torch.*_like(x)."),
    Mistake("weights_after_dropout", "weights returned after dropout",
            (("context = self.dropout(weights) @ values.unsqueeze(1)",
              "weights = self.dropout(weights)\n        context = weights @ values.unsqueeze(1)"),),
            explain='The returned weights went through dropout.',
            hint='Return the softmax output; apply dropout only to the copy that multiplies the values.'),
    concat_no_transpose(RETURN, 'return self.W_o(context.reshape(B, Tq, -1)), weights'),
) + dropout_mistakes('context = self.dropout(weights) @ values.unsqueeze(1)', 'context = self.dropout(weights @ values.unsqueeze(1))')


PROBLEM = Problem(
    id="multihead_additive_attention",
    title="Multi-head additive attention",
    summary="H independent additive scorers; contexts concatenated in head order, then W_o.",
    symbol="MultiHeadAdditiveAttention",
    points={
        "parameters": 2, "shapes": 1, "weight_sums": 2, "parity_float64": 4, "parity_float32": 1,
        "gradients": 2, "masking": 2, "stability": 1, "side_effects": 1, "dropout": 1, "cuda": 1, "cuda_half": 1,
    },
    hints=(
        "Project once with W_q and W_k, then split the last axis into heads: (B, T, H*h) -> (B, T, H, h) "
        "-> transpose to (B, H, T, h). Head n owns rows n*h:(n+1)*h of the projection.",
        "Each head has its own w_v[n]: scores[b, n, i, j] = sum over h of w_v[n] * tanh(q[b, n, i] + k[b, n, j]). "
        "Apply valid_lens to every head (repeat_interleave over B*H keeps batch-major order); do not average heads.",
        "context = dropout(weights) @ values.unsqueeze(1) is (B, H, Tq, dv); "
        "output = W_o(context.transpose(1, 2).reshape(B, Tq, H * dv)).",
    ),
    class_doc="Multi-head additive attention: H additive scorers over the same values.",
    methods=(
        Method(
            signature="def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):",
            statement=(
                "Create exactly these parameters (no biases) and a dropout of probability `dropout`:\n"
                "W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)\n"
                "W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)\n"
                "w_v = nn.Parameter of shape (num_heads, attn_dim)\n"
                "W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)\n"
                "Head n uses rows n*attn_dim:(n+1)*attn_dim of W_q and W_k, and w_v[n]."
            ),
            args=(
                ("num_heads", "H"), ("query_dim", "dq"), ("key_dim", "dk"), ("value_dim", "dv"),
                ("attn_dim", "h, per head"), ("dropout", "probability, 0.0 by default"),
            ),
        ),
        Method(
            signature=FORWARD_SIGNATURE,
            statement=(
                "scores[b, n, i, j] = w_v[n] . tanh((W_q q_i)[n] + (W_k k_j)[n]);\n"
                "weights = masked softmax over j per head, valid_lens applied to every head, (B, H, Tq, Tk);\n"
                "context[b, i] = concat over n of (dropout(weights[b, n]) @ values[b])[i], (B, Tq, H*dv);\n"
                "output = W_o(context). The returned weights are per head (not averaged), before dropout."
            ),
            args=FORWARD_ARGS,
            returns=(Out("output", "(B, Tq, dv)", "values"), Out("weights", "(B, H, Tq, Tk)", "weights")),
        ),
    ),
    imports=MODULE_IMPORTS,
    requires=("masked_softmax",),
    ctor=lambda c: {
        "num_heads": c["H"], "query_dim": c["dq"], "key_dim": c["dk"], "value_dim": c["dv"],
        "attn_dim": c["h"], "dropout": c.get("dropout", 0.0),
    },
    ctor_required=5,
    params=lambda c: {
        "W_q.weight": (c["H"] * c["h"], c["dq"]),
        "W_k.weight": (c["H"] * c["h"], c["dk"]),
        "w_v": (c["H"], c["h"]),
        "W_o.weight": (c["dv"], c["H"] * c["dv"]),
    },
    inputs=qkv_inputs,
    options={  # each check's options (the check units in judge/checks/ declare them)
        "stability": {"amplify": scale_scorer("w_v")},
    },
    mistakes=MISTAKES,
    track="multi-head",
    after=('additive_attention',),
)
