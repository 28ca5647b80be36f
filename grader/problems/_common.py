"""Pieces shared by the attention-module specs."""
import torch

from ..spec import LENS_DOC, SCORE_BOUND

MODULE_IMPORTS = "import torch\nfrom torch import nn\n\nfrom .masked_softmax import masked_softmax\n"

FORWARD_SIGNATURE = "def forward(self, queries, keys, values, valid_lens=None):"
FORWARD_ARGS = (
    ("queries", "(B, Tq, dq)"),
    ("keys", "(B, Tk, dk)"),
    ("values", "(B, Tk, dv)"),
    ("valid_lens", LENS_DOC),
)
WEIGHTS_RULES = (
    "weights = masked_softmax(scores, valid_lens), taken before dropout;\n"
    "output = dropout(weights) @ values. In eval() mode dropout does nothing."
)


def qkv_inputs(cfg, gen):
    """Random queries (B, Tq, dq), keys (B, Tk, dk), values (B, Tk, dv) in float64."""
    B, Tq, Tk = cfg["B"], cfg["Tq"], cfg["Tk"]
    shapes = [(B, Tq, cfg["dq"]), (B, Tk, cfg["dk"]), (B, Tk, cfg["dv"])]
    return [torch.randn(*s, generator=gen, dtype=torch.float64) for s in shapes]


def scale_scorer(name):
    """An `amplify` hook for scores = sum over h of w[n, h] * tanh(...): with |tanh| < 1, scaling
    the scorer `name` so that max_n sum_h |w[n, h]| = 1e4 bounds every |score| by 1e4."""

    def amplify(args, state, variant):
        w = state[name]
        w.mul_(SCORE_BOUND / w.abs().sum(-1).max())

    return amplify


BANNED = ("scaled_dot_product_attention", "_scaled_dot_product*", "multi_head_attention_forward",
          "_native_multi_head_attention")
"""What problems 6 and 7 may not call (torch function names; * matches a prefix): F.scaled_dot_product_attention
and the aten operators behind it, F.multi_head_attention_forward (what nn.MultiheadAttention runs) and its fast path."""

MASK_DOC = "None, or bool broadcastable to the weights; True = the key may be attended"


def scale_scores(args, factor):
    """Scale queries and keys (in place) so that every q . k grows by `factor`."""
    args[0].mul_(factor ** 0.5)
    args[1].mul_(factor ** 0.5)
