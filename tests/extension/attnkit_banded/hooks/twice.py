"""Worker side of the `repeatable` check: each run of the call made twice on the same inputs; the result says
whether both runs gave bit-identical outputs."""
import torch

from attnkit.run.hooks import Hook, register


class Twice(Hook):
    name = "twice"
    same = None
    fields = {"twice": ({"same": bool}, {})}

    def run(self, options, fn, args, once):
        first = once(fn, args)
        second = once(fn, args)
        self.same = all(torch.equal(a, b) for a, b in zip(first, second))
        return first

    def finish(self, options, state, result):
        result["twice"] = {"same": self.same}


register(Twice())
