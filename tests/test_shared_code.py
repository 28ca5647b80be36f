"""Shared code names no check, group or problem: the engines loop over what is registered.

"Shared code" is every module of the kit except the units that register something: check units
(grader/judge/checks/), problem specs (grader/problems/<id>.py), mask rules (grader/masks/<rule>.py) and worker
hooks (grader/run/hooks/<hook>.py). In it, no string constant may be a check id, a group name or a problem id, or
start with one and "/" (a case key). A few ids are also words of the engines' own vocabulary (a device type, a
field of a call or a report): those may appear, but never where code selects by id (compared with a case's group,
a check's id or a key, looked up in a spec's points or the registry, or passed to ctx.of / startswith / endswith).
"""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
import torch

from attnkit.judge.checks import CHECKS
from attnkit.judge.registry import BUILDERS
from attnkit.problems import all_problems
from attnkit.model.tracks import TRACKS
from attnkit.results import Report

KIT = Path(__file__).resolve().parent.parent / "grader"
UNITS = ("judge/checks/", "problems/", "masks/", "run/hooks/")
UNIT_PACKAGES = {"problems/__init__.py", "masks/__init__.py", "run/hooks/__init__.py", "judge/checks/__init__.py",
                 "masks/layout.py"}  # the registries' engines: shared code


def vocabulary() -> dict[str, bool]:
    """Ids that are also words of the engines' vocabulary, each with the fact that makes it one."""
    return {
        "cuda": torch.device("cuda").type == "cuda",  # a torch device type
        "memory": "memory" in {f.name for f in dataclasses.fields(Report)},  # a report field (how memory was measured)
        "source": True,  # nbformat's cell field, and the version of a kit run from its checkout
        "ctor": True,  # the call's constructor field (run/harness.py)
        "mask": True,  # the key of a call's evidence and of the public example's masking argument
        "grad": hasattr(torch.autograd, "grad"),  # a torch function's name (torch.autograd.grad, torch.func.grad)
        "masking": "masking" in [name for name, _ in TRACKS],  # a track's name
    }


def ids() -> set[str]:
    return set(CHECKS) | set(BUILDERS) | {p.id for p in all_problems()}


def shared_modules() -> list[Path]:
    out = []
    for path in sorted(KIT.rglob("*.py")):
        rel = path.relative_to(KIT).as_posix()
        if rel.startswith(UNITS) and rel not in UNIT_PACKAGES:
            continue
        out.append(path)
    return out


SELECTING_CALLS = {"of", "startswith", "endswith"}
SELECTING_ATTRS = {"group", "id", "builder", "key", "points", "groups"}


def _selecting(node: ast.Constant, parents: dict) -> bool:
    """Is the constant used to select by id (a comparison with a group/id/key, a lookup in points or the registry,
    an argument of ctx.of/startswith/endswith)?"""
    parent = parents.get(node)
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) and parent.func.attr in SELECTING_CALLS:
        return True
    if isinstance(parent, ast.Compare):
        names = [n.attr for n in ast.walk(parent) if isinstance(n, ast.Attribute)] + \
                [n.id for n in ast.walk(parent) if isinstance(n, ast.Name)]
        return any(n in SELECTING_ATTRS or n in ("CHECKS", "BUILDERS") for n in names)
    if isinstance(parent, ast.Subscript) and parent.slice is node:
        target = parent.value
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        return name in SELECTING_ATTRS or name in ("CHECKS", "BUILDERS")
    return False


def findings(path: Path, known: set[str], words: set[str]) -> list[str]:
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        if isinstance(parents.get(node), ast.Expr):  # a docstring: prose
            continue
        value = node.value
        hit = value if value in known else next((i for i in known if value.startswith(i + "/")), None)
        if hit is None or (hit in words and value == hit and not _selecting(node, parents)):
            continue
        out.append(f"{path.name}:{node.lineno}: {value!r}")
    return out


def test_the_vocabulary_is_real():
    assert all(vocabulary().values())


def test_no_shared_module_names_a_check_group_or_problem():
    known, words = ids(), set(vocabulary())
    found = [f for path in shared_modules() for f in findings(path, known, words)]
    assert not found, "shared code names particular checks, groups or problems:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    'if case.group == "dropout": pass',
    'x = ctx.of("base")',
    'ok = "oracle" in problem.points',
    'k.startswith("imports/")',
    'k = "masked_softmax"',
    'ok = case.group == "ctor"',
])
def test_the_scan_finds_what_it_forbids(tmp_path, source):
    path = tmp_path / "shared.py"
    path.write_text(source + "\n")
    assert findings(path, ids(), set(vocabulary()))
