"""Shapes and weight sums on one fixed example. Self-contained (torch only): candidate bundles
carry this file's code verbatim in their test_public.py, and the notebooks' quick checks run it."""
import torch


def call_fixed(target, ctor, input_shapes, lens):
    """Build (if ctor) and call target on seeded float64 inputs and valid_lens `lens`; its outputs as a list."""
    torch.manual_seed(0)
    if ctor is not None:
        target = target(*ctor[0], **ctor[1]).double().eval()
    inputs = [torch.randn(*shape, dtype=torch.float64) for shape in input_shapes]
    with torch.no_grad():
        out = target(*inputs, torch.tensor(lens))
    return list(out) if isinstance(out, (tuple, list)) else [out]


def fixed_example_problems(target, ctor, input_shapes, output_shapes, lens):
    """Call target on the fixed example; the list of what is wrong with the shapes and the weights."""
    out = call_fixed(target, ctor, input_shapes, lens)
    valid_lens = torch.tensor(lens)
    got = [tuple(o.shape) for o in out]
    if got != [tuple(s) for s in output_shapes]:
        return [f"output shapes {got}, expected {[tuple(s) for s in output_shapes]}"]
    weights = out[-1]
    keep = torch.arange(weights.shape[-1]) < valid_lens.view(-1, *[1] * (weights.dim() - 1))
    problems = []
    if (weights.masked_select(~keep.expand_as(weights)) != 0).any():
        problems.append("keys at j >= valid_len got nonzero weight (they must get exactly 0)")
    if not torch.allclose(weights.sum(-1), torch.ones((), dtype=weights.dtype)):
        problems.append(f"weight rows must sum to 1; row sums {weights.sum(-1).flatten()[:6].tolist()}")
    return problems
