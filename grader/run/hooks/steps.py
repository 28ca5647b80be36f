"""One step at a time: a module's own step method (`method`), or the function the call runs (no `method`: a function
defined beside the problem's, run/harness.py's `symbol`), called once per position of the arguments `split` (one
index or a list) along `dim` (the position taken out: y_t = targets[:, t]), argument `carry` being the previous step's
outputs `carry_outputs` (a recurrent state); the outputs are the steps' outputs stacked along `dim`, the carried ones
the last step's. Options: {"method" (or none), "split", "dim", "carry", "carry_outputs"}."""
from __future__ import annotations

import torch

from . import Hook, register


class Steps(Hook):
    name = "steps"

    def run(self, steps, fn, args, once):
        # the learner's own step method (an AttributeError if it has none), or the function the call runs itself
        method = getattr(fn, steps["method"]) if steps.get("method") else fn
        split = steps["split"] if isinstance(steps["split"], list) else [steps["split"]]
        args = list(args) + [None] * (steps["carry"] + 1 - len(args))  # a state left to its default: None
        carry, carried, runs = steps["carry_outputs"], args[steps["carry"]], []
        for pieces in zip(*(torch.unbind(args[i], dim=steps["dim"]) for i in split)):
            step = list(args)
            for i, piece in zip(split, pieces):
                step[i] = piece
            step[steps["carry"]] = carried
            runs.append(once(method, step))
            carried = tuple(runs[-1][i] for i in carry)
        return [runs[-1][i] if i in carry else torch.stack([r[i] for r in runs], dim=steps["dim"])
                for i in range(len(runs[-1]))]


register(Steps())
