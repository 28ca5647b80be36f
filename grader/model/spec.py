"""The shape of one problem's spec: everything else is generated from it or checked against it."""
from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import Callable

from .roles import MASK_ROLES, Arg, Out

DIMS = {
    "B": "batch size",
    "H": "number of heads",
    "Tq": "number of queries",
    "Tk": "number of keys (= values)",
    "dq": "query feature size",
    "dk": "key feature size",
    "dv": "value feature size",
    "h": "attention hidden size",
    "E": "embedding size (= H * d)",
    "d": "feature size per head, or the attention size",
    "T": "encoder steps, or positions (rows) of x",
    "Hq": "number of query heads",
    "Hkv": "number of key/value heads (Hq % Hkv == 0)",
    "G": "query heads per key/value head (Hq // Hkv)",
    "P": "cached positions",
    "S": "key positions: cached and new (P + T), or the encoder memory's",
    "E_mem": "memory feature size (memory_dim)",
    "Hd": "decoder hidden size",
    "M": "memory (encoder state) size",
    "n_s": "decoder state size",
    "n_h": "encoder state size",
    "r": "latent size (kv_rank)",
    "dn": "per-head key features without RoPE (head_dim_nope)",
    "dr": "RoPE'd key features shared by all heads (head_dim_rope)",
    "N_blocks": "physical blocks of a paged cache",
    "block_size": "token slots per block",
    "max_blocks": "entries of a sequence's block table",
    "...": "zero or more leading (batch) dims",
}
"""Named dimensions used in every docstring and message."""

SCORE_BOUND = 1e4
"""The contract promises finite, right results for |scores| up to this; `amplify` hooks reach it."""

LENS_DOC = "None, (B,) or (B, Tq) integer tensor; key j is valid for a query when j < valid_len"
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
"""Who sees a check's result on Gradescope (its results.json `visibility`): nobody, students after the due date,
after the grades are published, or at once."""


@dataclass(frozen=True)
class Method:
    """One function or method of a stub: its signature line, statement and documented args."""

    signature: str  # e.g. "def forward(self, queries, keys, values, valid_lens=None):"
    statement: str  # the math, in a few lines
    args: tuple[Arg, ...] = ()  # plain (name, doc) pairs are constructor arguments
    returns: tuple[Out, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "args", tuple(Arg(*a) for a in self.args))
        object.__setattr__(self, "returns", tuple(Out(*r) for r in self.returns))

    @property
    def name(self) -> str:
        """The function's name, from its signature line."""
        return self.signature.split("(", 1)[0].replace("def ", "").strip()


@dataclass(frozen=True)
class Mistake:
    """A common mistake, written as a small patch of the reference solution."""

    id: str
    name: str  # one line
    patch: tuple[tuple[str, str], ...]  # (old, new): each old occurs exactly once in solutions/<id>.py
    explain: str = ""
    hint: str = ""


@dataclass(frozen=True)
class Problem:
    id: str  # module name: exercises/<id>.py, solutions/<id>.py
    title: str
    summary: str  # one line for the README table
    symbol: str  # what the module must define
    points: dict[str, int]  # check id -> points; the checks a problem has are these keys
    hints: tuple[str, ...]
    # a function problem: its functions, the graded one (`symbol`) last, those it builds on before it (alibi_slopes,
    # then alibi_attention); a module: __init__, then its methods, forward last
    methods: tuple[Method, ...]
    class_doc: str = ""  # module problems: the class docstring
    imports: str = "import torch\n"
    ctor: Callable | None = None  # cfg -> {constructor name: value} in signature order; None: a function
    ctor_required: int = 0  # how many constructor values are passed positionally
    variants: tuple[dict, ...] = ({},)  # constructor settings beyond the dims (Luong's score modes)
    fit: Callable[[dict, dict], dict] = lambda cfg, variant: cfg  # constrain drawn dims per variant
    params: Callable[[dict], dict] = lambda cfg: {}  # cfg -> {parameter name: shape}
    inputs: Callable = None  # (cfg, torch.Generator) -> [float64 tensors], the args before valid_lens
    # (args, state, cfg, to) -> None: move every score to about `to` (< 0), in place, keeping some spread; None: not possible
    negative: Callable | None = None
    mistakes: tuple[Mistake, ...] = ()
    requires: tuple[str, ...] = ()  # problems whose module this one imports (their failures explain ours)
    trailing: Callable = lambda cfg: []  # arguments after the inputs and the masking argument (chunked's max_elements)
    banned: tuple[str, ...] = ()  # torch functions / aten operators the learner's code may not call
    # check id -> who sees its result on Gradescope (VISIBILITIES), over `attnkit gradescope build --visibility`
    visibility: dict | None = None
    # check id -> {option: value}: the check's typed options (its `options` dataclass, judge/registry.py), validated
    # when the spec loads
    options: dict | None = None
    settle: Callable | None = None  # (call, cfg) -> None: keeps a drawn call clear of the contract's boundaries, in place
    traced: bool = True  # its reference's stages are the learner's too (False: the learner chooses how to cut it up)
    track: str = ""  # the track (grader/model/tracks.py) this problem belongs to
    after: tuple[str, ...] = ()  # problems to solve first (besides `requires`): what this one builds on
    # the language of the texts above: "en" as written here; problems.get(id, lang) gives a copy whose texts come from
    # the catalogue grader/problems/<lang>/<id>.json (grader/model/i18n.py)
    lang: str = "en"
    # (module, extra): Python packages its grading needs beyond the kit's own requirements, and the extra that
    # installs each (problems.unavailable: without them the problem is shown as not available, never graded)
    needs: tuple[tuple[str, str], ...] = ()

    @property
    def is_module(self) -> bool:
        return self.ctor is not None

    def method(self, name: str | None) -> Method:
        """The function (or method) `name` of the spec; None: the call's own (the function, or forward)."""
        found = [m for m in self.methods if m.name == name]
        return found[0] if name is not None and found else self.methods[-1]

    @property
    def companions(self) -> tuple[Method, ...]:
        """A function problem's other functions, defined beside `symbol` in the same file (none for a module)."""
        return () if self.is_module else self.methods[:-1]

    @property
    def args(self) -> tuple[Arg, ...]:
        """The call's arguments (the function's, or forward's), with their roles."""
        return self.methods[-1].args

    @property
    def arg_names(self) -> list[str]:
        return [a.name for a in self.args]

    def arg_index(self, *roles: str) -> list[int]:
        """Positions of the call's arguments that play one of `roles`."""
        return [i for i, a in enumerate(self.args) if a.role in roles]

    @functools.cached_property  # (asked for every drawn call: computed once per spec)
    def mask_role(self) -> str | None:
        """The role of the argument that decides which keys a query may attend: lengths, mask, causal or None."""
        found = [self.args[i].role for i in self.arg_index(*MASK_ROLES)]
        return found[0] if found else None

    @functools.cached_property
    def mask_index(self) -> int | None:
        """Position of the masking argument among the call's arguments (None: the problem has none)."""
        found = self.arg_index(*MASK_ROLES)
        return found[0] if found else None

    @property
    def returns(self) -> tuple[Out, ...]:
        return self.methods[-1].returns

    @property
    def outputs(self) -> tuple[str, ...]:
        """Names of what the call returns, in order."""
        return tuple(o.name for o in self.returns)

    @property
    def dims(self) -> tuple[str, ...]:
        """Each output's named dims (cfg keys); "..." stands for cfg["lead"]."""
        return tuple(o.dims for o in self.returns)

    def out_index(self, role: str) -> int | None:
        """Position of the (first) output that plays `role`, or None."""
        found = [i for i, o in enumerate(self.returns) if o.role == role]
        return found[0] if found else None

    @property
    def weights_index(self) -> int | None:
        return self.out_index("weights")

    @property
    def max_points(self) -> int:
        return sum(self.points.values())

    def ctor_call(self, cfg: dict, variant: dict, **overrides) -> dict:
        """The constructor call for drawn dims: {"args": [...], "kwargs": {...}}. A keyword argument equal to the
        signature's default is left out, so that every call relies on the contract's defaults where it can."""
        values = list({**self.ctor({**cfg, **variant}), **overrides}.items())
        defaults = self.ctor_defaults
        kwargs = {k: v for k, v in values[self.ctor_required :]
                  if not (k in defaults and type(defaults[k]) is type(v) and defaults[k] == v)}
        return {"args": [v for _, v in values[: self.ctor_required]], "kwargs": kwargs}

    @property
    def call_defaults(self) -> dict:
        """{argument: default} of the call's signature (the function's, or forward's)."""
        return _defaults(self.methods[-1].signature)

    @property
    def ctor_defaults(self) -> dict:
        """{argument: default} of the constructor's signature (module problems)."""
        return _defaults(self.methods[0].signature) if self.is_module else {}


def _defaults(signature: str) -> dict:
    """{argument: default} of a signature line ("def f(x, base=10000.0):"), a copy of the one read once."""
    return dict(_read_defaults(signature))


@functools.lru_cache(maxsize=None)
def _read_defaults(signature: str) -> dict:
    fn = ast.parse(signature.strip() + " pass").body[0]
    args = fn.args.args[len(fn.args.args) - len(fn.args.defaults):]
    return {a.arg: _constant(d) for a, d in zip(args, fn.args.defaults)}


def _constant(node):
    """A default's value: a literal, or arithmetic on number literals (max_elements=2**20)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Pow, ast.Mult, ast.Add, ast.Sub)):
        left, right = _constant(node.left), _constant(node.right)
        return {ast.Pow: pow, ast.Mult: lambda a, b: a * b, ast.Add: lambda a, b: a + b,
                ast.Sub: lambda a, b: a - b}[type(node.op)](left, right)
    return ast.literal_eval(node)
