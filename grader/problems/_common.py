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
