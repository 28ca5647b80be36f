"""The seq2seq stage's draws keep the contract's promises: Luong's local attention never puts a valid key within
1e-6 of its window's edge (|s - p_t| = D), and the hidden calls reach what the contract singles out (local-m rows past
the source's end, local-p rows that sum to less than 1, rows of length 0)."""
from __future__ import annotations

import math

import torch

from attnkit.defaults import DEFAULT_SEED
from attnkit.judge.plan import draw
from attnkit.problems import get
from attnkit.problems.local_attention import EDGE_MARGIN, distances, factor

PID = "local_attention"


def _forwards(seed: int):
    """(cfg, call) of every forward the plan draws with the contract's shapes."""
    for case in draw(get(PID), seed).values():
        args = case.call.get("args") or []
        if len(args) >= 3 and all(isinstance(a, torch.Tensor) and a.dim() == 3 for a in args[:3]):
            yield {**case.variant, **case.cfg}, case.call


def _lens(call, B, Tq, Tk):
    lens = call["args"][3] if len(call["args"]) > 3 else None
    return torch.full((B, Tq), Tk) if lens is None else (lens[:, None].expand(B, Tq) if lens.dim() == 1 else lens)


def _near_edge(call, cfg) -> bool:
    """A valid key within 1e-6 of |s - p_t| = D (local-p; local-m's p_t = t is an integer and its edges are exact)."""
    if cfg["mode"] != "local-p":
        return False
    _, dist = distances(call, cfg)
    B, Tq, Tk = dist.shape
    valid = torch.arange(Tk) < _lens(call, B, Tq, Tk)[..., None]
    return bool((valid & ((dist.abs() - cfg["D"]).abs() < 1e-6)).any())


def test_a_call_on_the_edge_is_moved_off_it():
    """p_0 placed exactly at key 0 + D: the spec's settle moves v_p until no valid key is near an edge."""
    problem = get(PID)
    cfg, call = next((c, k) for c, k in _forwards(DEFAULT_SEED) if c["mode"] == "local-p" and k["args"][0].dtype ==
                     torch.float64 and _lens(k, *distances(k, c)[1].shape)[0, 0] - 1 > c["D"])
    L = float(_lens(call, *distances(call, cfg)[1].shape)[0, 0])
    q, state = call["args"][0], dict(call["state"])
    z = torch.tanh(q[0, 0] @ state["W_p.weight"].T)  # (h,): v_p . z decides p_0
    ratio = cfg["D"] / (L - 1)  # p_0 = (L - 1) * sigmoid(v_p . z) = D: key 0 on the window's edge
    state["v_p.weight"] = ((math.log(ratio) - math.log(1 - ratio)) * z / z.dot(z))[None, :]
    placed = dict(call, state=state)
    assert _near_edge(placed, cfg), "the constructed call must sit on an edge, else this test tests nothing"
    problem.settle(placed, cfg)
    assert not _near_edge(placed, cfg)
    _, dist = distances(placed, cfg)
    B, Tq, Tk = dist.shape
    valid = torch.arange(Tk) < _lens(placed, B, Tq, Tk)[..., None]
    assert ((dist.abs() - cfg["D"]).abs()[valid] >= EDGE_MARGIN).all()


def test_no_drawn_key_is_near_an_edge_and_the_contract_s_rows_are_reached():
    past_end = short_rows = empty = 0
    for seed in (DEFAULT_SEED, 1, 2, 3):
        for cfg, call in _forwards(seed):
            assert not _near_edge(call, cfg)
            allowed, _ = distances(call, cfg)
            rows = allowed.any(-1)
            if cfg["mode"] == "local-m":
                past_end += int((~rows).sum())
            else:
                sums = (torch.softmax(torch.zeros(allowed.shape, dtype=torch.float64).masked_fill(~allowed, -math.inf), -1)
                        .nan_to_num(0) * factor(call, cfg)).sum(-1)
                short_rows += int(((sums < 1 - 1e-6) & rows).sum())
            lens = call["args"][3] if len(call["args"]) > 3 else None
            empty += int(lens is not None and (lens == 0).any())
    assert past_end and short_rows and empty, (past_end, short_rows, empty)
