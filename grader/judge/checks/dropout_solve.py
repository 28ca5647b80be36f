"""The dropout check's solver (judge/checks/dropout.py). Where dropout acts: the reference's output as an affine function of its dropped weights.

With dropout, output = G(D * weights) for the contract's modules: G is affine (the values, heads
and W_o), D is 0 or 1/(1-p) per entry. The reference module, with its nn.Dropout replaced by an
injection point, gives G's matrix A and offset c for one call: output = A @ P + c, P the dropped
weights (B, [H,] Tq, Tk) flattened. A learner's train() output y is then solved for P (least
squares; the dropout calls' sizes make A of full column rank), and each entry of P / weights must be
0 or 1/(1-p) for the p the module was given.
"""
from __future__ import annotations

import torch
from torch import nn

from ...run.harness import load_state


class _Inject(nn.Module):
    """Stands where nn.Dropout stood: returns the tensor it was given (P) in place of what comes in."""

    value: torch.Tensor | None = None

    def forward(self, x):
        return x if self.value is None else self.value


def affine_map(target, call, weights_at: int, output_at: int) -> dict:
    """{"A": (outputs, entries), "c": (outputs,), "weights": the eval() weights} for a module problem's call whose
    outputs hold the weights at `weights_at` and the output they make at `output_at`."""
    module = target(*call["ctor"]["args"], **call["ctor"]["kwargs"]).to(torch.float64)
    load_state(module, call["state"])
    inject = _Inject()
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Dropout):
                setattr(parent, name, inject)
    args = [a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in call["args"]]
    with torch.no_grad():
        weights = module.eval()(*args)[weights_at]
        module.train()

        def output(p):
            inject.value = p
            return module(*args)[output_at]

        c = output(torch.zeros_like(weights)).reshape(-1)
        eye = torch.eye(weights.numel(), dtype=torch.float64)
        A = torch.stack([output(e.reshape(weights.shape)).reshape(-1) - c for e in eye], dim=1)
    return {"A": A, "c": c, "weights": weights}


def dropped_weights(reveal: dict, output: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(P, residual): the dropped weights that explain `output` best, and how far the output is from A @ P + c."""
    A, c = reveal["A"], reveal["c"]
    y = output.to(torch.float64).reshape(-1) - c
    P = torch.linalg.lstsq(A, y[:, None]).solution[:, 0]
    return P.reshape(reveal["weights"].shape), (A @ P - y).abs().max().item()
