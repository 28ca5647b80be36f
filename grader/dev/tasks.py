"""Generated files (stubs, notebooks, the docs' generated blocks, the report schema) and the kit's self-check, like rustlings' `dev check`.

`attnkit dev sync` rewrites what is generated, never touching a stub a learner has edited;
`attnkit dev check` proves every stub is not started, every solution passes, and every
generated file is fresh, and says which command fixes what it finds.
"""
from __future__ import annotations

import json
from pathlib import Path

from .. import ROOT
from ..problems import all_problems
from ..model.stubs import is_untouched_stub, render
from .docs import DOCS, SYNC

SCHEMA = "grader/report.schema.json"


def render_schema(text: str) -> str:
    """The report schema with the problem-id enum taken from the specs, and the capability enum of `uses` from the
    source read's (judge/scan/capabilities.py)."""
    from ..judge.scan.capabilities import Capability

    data = json.loads(text)
    problem = data["properties"]["problems"]["items"]["properties"]
    problem["id"]["enum"] = [p.id for p in all_problems("en")]
    problem["uses"]["items"]["properties"]["capability"]["enum"] = [c.value for c in Capability]
    return json.dumps(data, indent=2) + "\n"


def _notebook_untouched(path: Path) -> bool:
    """A learner notebook whose implementation cells are all still stubs (safe to regenerate)."""
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - unreadable: treat as the learner's, never overwrite
        return False
    cells = [c.source for c in nb.cells if c.cell_type == "code" and c.source.startswith("# attnkit: ")]
    return bool(cells) and all(is_untouched_stub(src) for src in cells)


NOTEBOOK_DIRS = {"en": "notebooks", "zh": "notebooks/zh"}
"""Where the learner notebooks of each language live."""


def _notebooks():
    """(relative path, language, problem id) of every learner notebook."""
    return [(f"{folder}/{p.id}.ipynb", lang, p.id) for lang, folder in NOTEBOOK_DIRS.items()
            for p in all_problems("en")]


def stale(root: Path = ROOT) -> list[str]:
    """One line per generated file that is not what the specs say; each names the fix."""
    from ..integrations.notebooks import build, text

    out = []
    for rel, lang, pid in _notebooks():
        path = root / rel
        if not path.exists():
            out.append(f"{rel} is missing: run `{SYNC}`")
        elif _notebook_untouched(path) and path.read_text() != text(build(pid, "learner", lang=lang)):
            out.append(f"{rel} is stale: run `{SYNC}`")
    for p in all_problems("en"):
        path = root / "exercises" / f"{p.id}.py"
        if not path.exists():
            out.append(f"exercises/{p.id}.py is missing: run `{SYNC}`")
        elif is_untouched_stub(path.read_text()) and path.read_text() != render(p):
            out.append(f"exercises/{p.id}.py is an outdated stub: run `{SYNC}`")
    for rel, (what, render_doc) in DOCS.items():
        path = root / rel
        if not path.exists():
            out.append(f"{rel} is missing (it holds hand-written text around {what}: restore it from git)")
        else:
            try:
                fresh = path.read_text() == render_doc(path.read_text())
            except ValueError as exc:  # a block missing or misplaced: the message says which
                out.append(f"{exc}: fix the markers by hand, then run `{SYNC}`")
                continue
            if not fresh:
                out.append(f"{rel}'s generated blocks ({what}) are stale: run `{SYNC}`")
    schema = root / SCHEMA
    if schema.read_text() != render_schema(schema.read_text()):
        out.append(f"{SCHEMA}'s problem ids are stale: run `{SYNC}`")
    return out


def sync(root: Path = ROOT) -> list[str]:
    """Rewrite generated files; a stub the learner has worked on is left alone (and reported)."""
    done = []
    for p in all_problems("en"):
        path = root / "exercises" / f"{p.id}.py"
        text = render(p)
        if path.exists() and not is_untouched_stub(path.read_text()):
            done.append(f"kept exercises/{p.id}.py: it holds your work (move it away to get a fresh stub)")
        elif not path.exists() or path.read_text() != text:
            path.write_text(text)
            done.append(f"wrote exercises/{p.id}.py")
    from ..integrations.notebooks import build, text

    for rel, lang, pid in _notebooks():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        new_text = text(build(pid, "learner", lang=lang))
        if path.exists() and not _notebook_untouched(path):
            done.append(f"kept {rel}: it holds your work (move it away to get a fresh one)")
        elif not path.exists() or path.read_text() != new_text:
            path.write_text(new_text)
            done.append(f"wrote {rel}")
    for rel, (what, render_doc) in DOCS.items():
        path = root / rel
        if path.exists():
            new = render_doc(path.read_text())
            if new != path.read_text():
                path.write_text(new)
                done.append(f"wrote {rel}'s generated blocks ({what})")
    schema = root / SCHEMA
    new = render_schema(schema.read_text())
    if new != schema.read_text():
        schema.write_text(new)
        done.append(f"wrote {SCHEMA}")
    return done


def self_check(root: Path = ROOT) -> list[str]:
    """Stubs not started, solutions at full marks, generated files fresh; one line per finding."""
    import tempfile

    from ..grading import grade

    out = stale(root)
    with tempfile.TemporaryDirectory() as tmp:
        for p in all_problems("en"):
            (Path(tmp) / f"{p.id}.py").write_text(render(p))
        for p in grade(tmp).problems:
            if p.status != "not_started":
                out.append(f"the stub of {p.id} is {p.status}, not 'not started': fix grader/problems/{p.id}.py, "
                           f"then run `{SYNC}`")
    for p in grade(root / "solutions").problems:
        if p.score != p.max_score:
            bad = [c.id for c in p.checks if c.status not in ("passed", "skipped")]
            out.append(f"solutions/{p.id}.py scores {p.score:g}/{p.max_score:g} (failing: {', '.join(bad)}): "
                       f"fix it, or the checks; `attnkit grade --impl solutions` shows why")
    return out
