"""A boolean mask beside a causal flag (ALiBi's `is_causal` and `mask`): key j is allowed for query i when the mask
allows it and, where the call's flag (the argument of role "flag") is set, j <= i + (Tk - Tq)."""
from __future__ import annotations

from . import register
from .boolean import BooleanMask
from .causal import causal_mask
from .layout import score_shape


def flag(problem, call) -> bool:
    """The call's flag: its argument of role "flag", or the signature's default where the call leaves it out (or where
    there is no call: the public example)."""
    at = problem.arg_index("flag")[0]
    args = (call or {}).get("args") or []
    return bool(args[at] if at < len(args) else problem.call_defaults[problem.arg_names[at]])


class FlaggedMask(BooleanMask):
    role = "flagged_mask"
    flagged = True  # the public example spells the allowed keys out (integrations/public.py)
    doc = "a boolean mask broadcastable to the weights, True = attend, and the causal rule where the flag says so"

    def allowed(self, problem, cfg, arg, call=None):
        allowed = super().allowed(problem, cfg, arg, call)
        if not flag(problem, call):
            return allowed
        shape = score_shape(problem, cfg)
        return allowed & causal_mask(shape[-2], shape[-1])


register(FlaggedMask())
