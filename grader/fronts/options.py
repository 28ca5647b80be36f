"""Checking the kit's command-line input: one clear line per problem, never a traceback."""
from __future__ import annotations

from pathlib import Path

from ..errors import BadInput
from ..run.limits import FLAGS, Limits


def default_impl() -> Path:
    """exercises/ of the current directory if there is one, else the kit's own."""
    from .. import ROOT

    here = Path.cwd() / "exercises"
    return here if here.is_dir() else ROOT / "exercises"


def json_path(path, flag: str = "--json") -> Path:
    """A file the command will write: its folder exists and it can really be written."""
    p = Path(path).expanduser()
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise BadInput(f"{flag} {path}: is a directory")
    if not parent.is_dir():
        raise BadInput(f"{flag} {path}: directory {parent} does not exist")
    existed = p.exists()
    try:  # a real test: permission bits do not tell for root, read-only mounts or /proc
        with open(p, "a"):
            pass
    except OSError as exc:
        raise BadInput(f"{flag} {path}: not writable ({exc.strerror})") from None
    if not existed:
        p.unlink()
    return p


def problem_list(text) -> list[str] | None:
    """--problems ID,...: ids or unique prefixes, in track order; None for all."""
    if not text:
        return None
    from .. import problems
    from ..problems import resolve

    chosen = {resolve(name.strip()) for name in text.split(",") if name.strip()}
    return [pid for pid in problems.ORDER if pid in chosen]


def positive(kind):
    """An argparse type: a number of `kind` (int or float) above 0, else one clear line (exit 2)."""
    import argparse

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0 or value != value or value in (float("inf"),):
            raise argparse.ArgumentTypeError(f"must be a number above 0, not {text}")
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse


def add_flags(add, prefix: str = "--") -> None:
    """Declare the limit flags with `add(flag, dest=..., ...)` (argparse's or pytest's addoption, whose
    flags take `prefix`: --attnkit-cpu-limit)."""
    for field, flag, metavar, text in FLAGS:
        add(prefix + flag[2:], dest=f"limit_{field}", type=positive(int), default=None, metavar=metavar,
            help=f"{text} (default {getattr(Limits(), field)})")


def from_options(options) -> Limits:
    return Limits(**{f: getattr(options, f"limit_{f}") for f, *_ in FLAGS if getattr(options, f"limit_{f}", None) is not None})


def limit_args(limits: Limits) -> list[str]:
    """The limits that differ from the defaults, as the pytest plugin's flags (--attnkit-cpu-limit 5 ...)."""
    default = Limits()
    return [a for f, flag, *_ in FLAGS if getattr(limits, f) != getattr(default, f)
            for a in ("--attnkit-" + flag[2:], str(getattr(limits, f)))]


def variant_name(text: str) -> str:
    """An argparse type: a variant's name (`--variant`): 1 to 64 letters, digits and . _ + @ - (a name that is safe in
    a file name, a shell command and a report)."""
    import argparse
    import re

    if not re.fullmatch(r"[A-Za-z0-9._+@-]{1,64}", text):
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not a variant name: 1 to 64 letters, digits and . _ + @ -")
    return text


def share(text: str) -> float:
    """An argparse type: a share between 0 and 1."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a share between 0 and 1")
    return value
