"""A chain of calls: argument `split` cut along `dim` into pieces of `sizes`, the call run once per piece, argument
`carry` being the previous run's outputs `carry_outputs` (a cache); the outputs are the pieces' outputs
concatenated, the carried ones the last run's. Options: {"sizes", "split", "dim", "carry", "carry_outputs"}, and
"clear": arguments passed as None once a cache is carried (an encoder's memory, which the cache replaces), and "later":
[(argument, value)] passed instead once a cache is carried (a memory of other values, which must be ignored)."""
from __future__ import annotations

import torch

from . import Hook, register


class Chain(Hook):
    name = "chain"

    def run(self, chain, fn, args, once):
        carry = chain["carry_outputs"]
        carried, runs = args[chain["carry"]], []
        for piece in torch.split(args[chain["split"]], chain["sizes"], dim=chain["dim"]):
            step = list(args)
            step[chain["split"]], step[chain["carry"]] = piece, carried
            if carried is not None:
                for i in chain.get("clear", ()):
                    step[i] = None
                for i, value in chain.get("later", ()):
                    step[i] = value
            runs.append(once(fn, step))
            carried = tuple(runs[-1][i] for i in carry)
        return [runs[-1][i] if i in carry else torch.cat([r[i] for r in runs], dim=chain["dim"])
                for i in range(len(runs[-1]))]


register(Chain())
