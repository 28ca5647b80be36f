"""`attnkit similarity`: a copy with renamed variables and a copy with its definitions reordered are flagged;
independent correct solutions of the same problems are not; the stub's text never counts."""
from __future__ import annotations

import io
import json
import keyword
import builtins
import shutil
import tokenize

from conftest import SOLUTIONS, ROOT
from attnkit.model.stubs import render
from attnkit.problems import get
from test_hiring_and_scale import attnkit

PROBLEMS = ("masked_softmax", "additive_attention", "luong_attention", "multihead_attention", "flash_attention",
            "grouped_query_attention", "rope")
KEEP = {"torch", "nn", "F", "math", "self", "super"} | set(dir(builtins)) | set(keyword.kwlist)


def renamed(source: str) -> str:
    """Every name the author chose, renamed (attributes after a dot and library names kept)."""
    out, previous, names = [], None, {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        text = tok.string
        if tok.type == tokenize.NAME and text not in KEEP and not (previous and previous.string == "."):
            text = names.setdefault(text, f"q{len(names)}_{text[::-1]}")
        out.append((tok.type, text))
        previous = tok
    return tokenize.untokenize(out)


def reordered(source: str) -> str:
    """The top-level definitions in reverse order after the imports (a learner moving helpers around)."""
    import ast

    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    head = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    body = [n for n in tree.body if n not in head]
    chunk = lambda n: "".join(lines[(n.decorator_list[0].lineno if getattr(n, "decorator_list", None) else n.lineno) - 1:n.end_lineno])
    return "".join(chunk(n) + "\n" for n in head) + "\n\n".join(chunk(n) for n in reversed(body)) + "\n"


def _submissions(tmp_path):
    folder = tmp_path / "subs"
    people = {"alice": lambda pid: (SOLUTIONS / f"{pid}.py").read_text(),
              "bob": lambda pid: renamed((SOLUTIONS / f"{pid}.py").read_text()),
              "carol": lambda pid: reordered((SOLUTIONS / f"{pid}.py").read_text()),
              "dave": lambda pid: (ROOT / "tests" / "impls" / "einsum" / f"{pid}.py").read_text(),
              "erin": lambda pid: (ROOT / "tests" / "impls" / "loops" / f"{pid}.py").read_text(),
              "frank": lambda pid: render(get(pid))}  # handed in the stubs untouched
    for name, source in people.items():
        (folder / name).mkdir(parents=True)
        for pid in PROBLEMS:  # each of them has an einsum and a loop style in tests/impls
            (folder / name / f"{pid}.py").write_text(source(pid))
    shutil.make_archive(str(folder / "gina"), "zip", folder / "bob")  # a zip, and a copy of a copy
    return folder


def test_copies_are_flagged_and_independent_solutions_are_not(tmp_path):
    folder = _submissions(tmp_path)
    out = tmp_path / "pairs.json"
    r = attnkit("similarity", str(folder), "--json", str(out))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    flagged = {frozenset((p["a"], p["b"])) for p in json.loads(out.read_text())["pairs"]}
    copies = {frozenset(p) for p in (("alice", "bob"), ("alice", "carol"), ("bob", "carol"), ("bob", "gina.zip"),
                                     ("alice", "gina.zip"), ("carol", "gina.zip"))}
    assert copies <= flagged, sorted(map(sorted, copies - flagged))
    assert not any({"dave", "erin", "frank"} & pair for pair in flagged), sorted(map(sorted, flagged - copies))
    assert "alice" in r.stdout and "pair(s) at or above 60% alike" in r.stdout


def test_a_results_folder_leads_to_its_submissions_and_bad_input_is_one_line(tmp_path):
    folder = _submissions(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    (results / "source.json").write_text(json.dumps({"submissions": str(folder)}))  # as grade-batch writes it
    r = attnkit("similarity", str(results), "--threshold", "0.9")
    assert r.returncode == 0 and "alice  bob" in r.stdout
    for args, said in ((["similarity", str(tmp_path / "nope")], "not a directory of submissions"),
                       (["similarity", str(folder), "--threshold", "2"], "not a share between 0 and 1")):
        bad = attnkit(*args)
        assert bad.returncode == 2 and said in bad.stderr and "Traceback" not in bad.stderr


def test_code_moved_into_a_helper_module_is_still_compared_and_shown(tmp_path):
    """A copy whose problem files are one-line imports of helper modules (which the grader runs, so grades): the
    similarity check compares the helpers' code under each problem, and the interviewer's report shows them."""
    from attnkit.integrations.similarity import pairs
    from attnkit.report.interview import sources

    for name in ("alice", "carol"):
        (tmp_path / "class" / name).mkdir(parents=True)
    for f in ("masked_softmax.py", "additive_attention.py"):
        shutil.copy(SOLUTIONS / f, tmp_path / "class" / "alice" / f)
    carol = tmp_path / "class" / "carol"
    shutil.copy(SOLUTIONS / "masked_softmax.py", carol / "ms_impl.py")
    (carol / "aa_impl.py").write_text((SOLUTIONS / "additive_attention.py").read_text()
                                      .replace("from .masked_softmax import", "from .ms_impl import"))
    (carol / "masked_softmax.py").write_text("from .ms_impl import masked_softmax  # noqa: F401\n")
    (carol / "additive_attention.py").write_text("from .aa_impl import AdditiveAttention  # noqa: F401\n")
    found = pairs(tmp_path / "class")
    assert [(p["a"], p["b"]) for p in found] == [("alice", "carol")], found
    shown = sources(carol, ["masked_softmax", "additive_attention"])
    notes = [note for _, _, note in shown]
    assert notes == ["masked_softmax.py", "ms_impl.py, imported by masked_softmax.py", "additive_attention.py",
                     "aa_impl.py, imported by additive_attention.py"], notes
    assert "def forward" in shown[3][1]
