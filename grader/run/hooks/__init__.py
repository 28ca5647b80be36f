"""Worker-side hooks: what a check needs the harness to do around a learner's call, by name.

A call names its hooks with their options (`call["hooks"] = {name: options}`); the harness (run/harness.py) and the
worker (run/worker.py) loop over them and name none. A hook may:
  setup(options)                      once per worker, before the learner's module loads (first batch)
  importing(options)                  a context manager around the grader's own imports of a module (the reference,
                                      a catalogued mistake's variant): what setup does for a worker's whole life
  around(options)                     a context manager around the call's runs; what it yields is its state
  run(options, fn, args, once)        one run of the call (default: once(fn, args), the plain call)
  prepare(options, value)             each argument, after the grader's own preparation
  finish(options, state, result)      entries of its own added to the call's result
A hook module is one file of this package (or of an extension's `hooks` package, grader/extensions.py); it
imports only torch and the worker's own modules, since workers see nothing else of the kit (run/jail.py).
"""
from __future__ import annotations

import contextlib
import importlib
import pkgutil

from ...extensions import modules

HOOKS: dict = {}


class Hook:
    name: str = ""
    order: int = 50  # nesting of `around`: lower is outer
    reference: bool = True  # the reference's run of the call (its expected values) goes through the hook too
    noun: str = ""  # what the call returns, where the hook converts outputs ("NumPy array")
    heavy: bool = False  # its calls are slow (a worker with some goes first)
    grace: float = 0.0  # seconds of the grader's own work it adds to its call (a compilation): the worker's clock
    # moves on by them once, when that call is the one running (run/handle.py), never the learner's time
    fields: dict = {}  # result entries it adds: name -> ({required: type}, {optional: type}), checked on arrival
    # modules a worker imports before its sandbox (whose uid may not reach their files), for a problem with the hook
    preload: tuple = ()

    def setup(self, options) -> None:
        return None

    def importing(self, options):
        return contextlib.nullcontext()

    def around(self, options):
        return contextlib.nullcontext()

    def run(self, options, fn, args, once):
        return once(fn, args)

    def prepare(self, options, value):
        return value

    def convert(self, options, value, label: str):
        """One returned value as a CPU/CUDA tensor (hooks with a `noun` only); raise ValueError(why) if it is not
        what the call must return."""
        return value

    def finish(self, options, state, result: dict) -> None:
        return None

    def outside(self, options):
        """Its options where the grader measures the call from outside the worker (None: not needed then)."""
        return options


def register(hook: Hook) -> Hook:
    if hook.name in HOOKS:
        raise ValueError(f"worker hook {hook.name!r} is registered twice")
    HOOKS[hook.name] = hook
    return hook


def active(call: dict) -> list:
    """(hook, options) for each hook the call names, outermost first."""
    found = [(HOOKS[name], options) for name, options in (call.get("hooks") or {}).items()]
    return sorted(found, key=lambda pair: pair[0].order)


def grace(call: dict) -> float:
    """Seconds of the grader's own work the call's hooks add to it (Hook.grace)."""
    return sum(HOOKS[name].grace for name in (call.get("hooks") or {}))


def for_reference(call: dict) -> dict:
    """The call without the hooks the reference's run skips (measurements, refusals of the learner's calls)."""
    hooks = {n: o for n, o in (call.get("hooks") or {}).items() if HOOKS[n].reference}
    return dict(call, hooks=hooks)


def outside(call: dict) -> dict:
    """The call as sent where the grader measures the worker from outside: each hook's `outside(options)` (None:
    the hook is dropped)."""
    hooks = {n: HOOKS[n].outside(o) for n, o in (call.get("hooks") or {}).items()}
    return dict(call, hooks={n: o for n, o in hooks.items() if o is not None})


@contextlib.contextmanager
def importing(hooks: dict):
    """Each of the hooks' (`{name: options}`) `importing` context entered, outermost first."""
    with contextlib.ExitStack() as stack:
        for h, options in active({"hooks": hooks}):
            stack.enter_context(h.importing(options))
        yield


def heavy(call: dict) -> bool:
    return any(HOOKS[n].heavy for n in call.get("hooks") or {})


def _load() -> None:
    for name in [f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__)] + modules("hooks"):
        importlib.import_module(name)


_load()
