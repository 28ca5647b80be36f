"""A call's answer, decoded once where it arrives (from a worker, the reference, a mistaken variant, or a check
that answers its own calls): typed, so that nothing downstream reads raw dicts.

    runs: [[tensor per output] per run]  (empty where the call only built a module, or returned nothing)
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Raised:
    """What a call raised: its exception type's name, its text as shown to the learner, its message."""

    type: str
    text: str
    message: str = ""
    value_error: bool = False


@dataclass
class Answer:
    ok: bool
    runs: list = field(default_factory=list)
    grads: dict | None = None  # "input:<i>" / "param:<name>" -> tensor or None
    params: dict | None = None  # a module's parameter names -> shapes
    state: list | None = None  # the names its state_dict holds (a construct call)
    devices: list = field(default_factory=list)
    changed: list = field(default_factory=list)  # arguments the call changed (decided by the grader, grading.py)
    inputs: list | None = None  # digests of the inputs as the worker holds them after the call (compared by the grader)
    earlier: list | None = None  # an inference call's earlier run: [its outputs as returned, the same tensors at the end]
    error: Raised | None = None
    rejected: str | None = None  # why the grader refuses what came back (judge/context.decode): the learner's
    grader_error: bool = False  # the grader failed around the call, not the learner
    extra: dict = field(default_factory=dict)  # a worker hook's entries, a self-answering check's, an expected value's

    @property
    def outputs(self) -> list | None:
        """The first run's outputs (None where nothing came back)."""
        return self.runs[0] if self.runs else None

    @property
    def has_outputs(self) -> bool:
        return self.ok and bool(self.runs)

    KNOWN = ("ok", "outputs", "grads", "params", "state", "devices", "changed", "inputs", "earlier", "error",
             "rejected", "grader_error")

    @classmethod
    def of(cls, res) -> Answer | None:
        """The typed answer of a result dict (as the worker, the harness or a check gives it); an Answer as it is."""
        if res is None or isinstance(res, Answer):
            return res
        error = res.get("error")
        return cls(
            ok=res.get("ok") is True, runs=list(res.get("outputs") or []), grads=res.get("grads"),
            params=res.get("params"), state=res.get("state"), devices=list(res.get("devices") or []), changed=list(res.get("changed") or []),
            inputs=res.get("inputs"), earlier=res.get("earlier"), rejected=res.get("rejected"), grader_error=res.get("grader_error") is True,
            error=None if error is None else Raised(error.get("type", ""), error.get("text", ""),
                                                    error.get("message", ""), bool(error.get("value_error"))),
            extra={k: v for k, v in res.items() if k not in cls.KNOWN},
        )
