"""Check repeatable: the same call twice on the same inputs gives bit-identical outputs (no hidden state, no
randomness), measured in the worker by the `twice` hook (hooks/twice.py)."""
from attnkit.draw.groups import case_key, each_case
from attnkit.draw.scenarios import Case, base_call, make_mask
from attnkit.judge.context import Failed
from attnkit.judge.registry import Check, register


def group_twice(problem, seed):
    """Config 0 of each variant, with the masking argument of the problem's per-query form, run twice."""
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci == 0:
            call = base_call(problem, cfg, variant, gen("twice"), make_mask(problem, "w3", cfg, gen("twice", "m")))
            call["hooks"] = {"twice": True}
            cases.append(Case(case_key("twice", vi, ci), "twice", variant, cfg, call))
    return cases


def check_repeatable(ctx):
    for case in ctx.of("twice"):
        seen = ctx.result(case).extra.get("twice")
        if not isinstance(seen, dict) or seen.get("same") is not True:
            raise Failed("the same call twice on the same inputs gave different outputs: no hidden state, no "
                         "randomness", case, symptom="stateful")


register(Check("repeatable", "the same call twice gives the same outputs", {"twice": group_twice}, check_repeatable,
               names=("stateful",)))
