"""One step at a time: a module's own step method (`method`) called once per position of argument `split` along
`dim` (the position taken out: y_t = targets[:, t]), argument `carry` being the previous step's outputs
`carry_outputs` (a recurrent state); the outputs are the steps' outputs stacked along `dim`, the carried ones the last
step's. Options: {"method", "split", "dim", "carry", "carry_outputs"}."""
from __future__ import annotations

import torch

from . import Hook, register


class Steps(Hook):
    name = "steps"

    def run(self, steps, fn, args, once):
        method = getattr(fn, steps["method"])  # the learner's own step (an AttributeError if it has none)
        carry, carried, runs = steps["carry_outputs"], args[steps["carry"]], []
        for piece in torch.unbind(args[steps["split"]], dim=steps["dim"]):
            step = list(args)
            step[steps["split"]], step[steps["carry"]] = piece, carried
            runs.append(once(method, step))
            carried = tuple(runs[-1][i] for i in carry)
        return [runs[-1][i] if i in carry else torch.stack([r[i] for r in runs], dim=steps["dim"])
                for i in range(len(runs[-1]))]


register(Steps())
