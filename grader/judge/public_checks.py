"""Shapes and weight sums on one fixed example. Self-contained (torch only): candidate bundles
carry this file's code verbatim in their test_public.py, and the notebooks' quick checks run it."""
import torch


def call_fixed(target, ctor, input_shapes, mask, trailing=(), numpy=False):
    """Build (if ctor) and call target on seeded float64 inputs (a shape each, or {"values": integers} for an
    integer input such as positions), then `mask` (valid_lens as a list of ints, a boolean mask as nested lists,
    a causal flag as a bool, any other number as it is, or None for no masking argument) and `trailing`; its
    outputs."""
    torch.manual_seed(0)
    if ctor is not None:
        target = target(*ctor[0], **ctor[1]).double().eval()
    inputs = [_input(s) for s in input_shapes]
    if numpy:
        inputs = [x.numpy() for x in inputs]
    extra = [] if mask is None else [mask] if isinstance(mask, (bool, int, float)) else [torch.tensor(mask)]
    with torch.no_grad():
        out = target(*inputs, *extra, *trailing)
    return [torch.as_tensor(o) for o in _flat(out if isinstance(out, (tuple, list)) else [out])]


def _input(spec):
    """A shape -> seeded float64 values; {"values": integers} -> those; {"none": True} -> None;
    {"tuple": [shape, ...]} -> a tuple of seeded float64 tensors (a cache); {"scalar": value} -> that setting."""
    if isinstance(spec, dict):
        if spec.get("none"):
            return None
        if "tuple" in spec:
            return tuple(torch.randn(*s, dtype=torch.float64) for s in spec["tuple"])
        if "scalar" in spec:
            return spec["scalar"]
        return torch.tensor(spec["values"])
    return torch.randn(*spec, dtype=torch.float64)


def _flat(out):
    """Outputs with a nested tuple (output, (k, v)) spread out."""
    return [t for o in out for t in (o if isinstance(o, (tuple, list)) else (o,))]


def fixed_example_problems(target, ctor, input_shapes, output_shapes, mask, trailing=(), numpy=False, weights_at=-1,
                           row_sums=True, keep=None):
    """Call target on the fixed example; the list of what is wrong with the shapes and (where the outputs
    hold weights, at `weights_at`; None: they do not) the weights: 0 on masked keys, and each row with an allowed key
    summing to 1 where `row_sums` (False: a problem whose rows need not, as local attention's window and Gaussian).
    `keep`: the allowed keys laid out against the weights (nested lists), where the mask alone does not say how."""
    out = call_fixed(target, ctor, input_shapes, mask, trailing, numpy)
    got = [tuple(o.shape) for o in out]
    if got != [tuple(s) for s in output_shapes]:
        return [f"output shapes {got}, expected {[tuple(s) for s in output_shapes]}"]
    if weights_at is None:
        return [] if all(torch.isfinite(o).all() for o in out if o.is_floating_point()) else ["an output has NaN or inf"]
    weights = out[weights_at]
    if keep is not None:
        keep = torch.tensor(keep, dtype=torch.bool)
    elif mask is not None and not isinstance(mask, (bool, int, float)):
        m = torch.tensor(mask)
        keep = m if m.dtype == torch.bool else torch.arange(weights.shape[-1]) < m.view(-1, *[1] * (weights.dim() - 1))
    else:
        keep = torch.ones(weights.shape, dtype=torch.bool)
    keep = keep.expand_as(weights)
    problems = []
    if (weights.masked_select(~keep) != 0).any():
        problems.append("masked keys got nonzero weight (they must get exactly 0)")
    if not torch.isfinite(weights).all():
        problems.append("weights with NaN or inf (a row with no allowed key must be all zeros)")
    sums = weights.sum(-1)[keep.any(-1)]
    if row_sums and not torch.allclose(sums, torch.ones((), dtype=sums.dtype)):
        problems.append(f"weight rows must sum to 1; row sums {sums.flatten()[:6].tolist()}")
    return problems
