"""The shapes a call's outputs and scores take for drawn dims: what the mask rules lay their masks against."""
from __future__ import annotations


def dim_names(dims: str, cfg: dict) -> list[str]:
    """Named dims of a dims string, with "..." expanded to the config's leading dims."""
    return [n for d in dims.split() for n in (cfg.get("lead", []) if d == "..." else [d])]


def output_shapes(problem, cfg: dict) -> list[tuple]:
    return [tuple(cfg[d] for d in dim_names(dims, cfg)) for dims in problem.dims]


def score_shape(problem, cfg: dict) -> tuple:
    """The shape of the call's score matrix (..., Tq, Tk): the weights' shape where the problem returns them,
    else its first output's rows with Tk keys."""
    shapes = output_shapes(problem, cfg)
    at = problem.weights_index
    return shapes[at] if at is not None else shapes[0][:-1] + (cfg["Tk"],)


def score_names(problem, cfg: dict) -> list[str]:
    """The names of score_shape's dims (..., Tq, Tk)."""
    at = problem.weights_index
    if at is not None:
        return dim_names(problem.dims[at], cfg)
    return dim_names(problem.dims[0], cfg)[:-1] + ["Tk"]


def lens_to_mask(problem, cfg: dict, lens):
    """valid_lens (B,) or (B, Tq) as the boolean mask they mean, laid out against the weights: (B, 1.., 1 or Tq, Tk)."""
    import torch

    per_query = lens[:, None] if lens.dim() == 1 else lens
    mask = torch.arange(cfg["Tk"]) < per_query[..., None]  # (B, 1 or Tq, Tk)
    n_lead = len(score_shape(problem, cfg)) - 2
    return mask[0] if n_lead == 0 else mask.reshape(mask.shape[0], *[1] * (n_lead - 1), *mask.shape[1:])


def make_lens(kind: str, cfg: dict, gen, low: int = 0):
    """valid_lens of a kind ("batch": (B,), "query": (B, Tq)); with low=0 they include both 0 and Tk where there is
    room."""
    import torch

    if kind == "none":
        return None
    B, Tq, Tk = cfg["B"], cfg["Tq"], cfg["Tk"]
    shape = (B,) if kind == "batch" else (B, Tq)
    lens = torch.randint(low, Tk + 1, shape, generator=gen)
    flat = lens.view(-1)
    flat[0] = Tk
    if flat.numel() > 1:
        flat[-1] = low
    return lens
