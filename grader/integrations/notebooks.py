"""Notebooks generated from the specs, stubs and solutions: nothing in them is typed twice.

`learner` notebooks (notebooks/<id>.ipynb) hold the statement, stub cells to fill in, quick
visible checks, a cell that runs the full grading, and a heatmap cell. nbgrader `source`
notebooks hold the same cells with the reference inside solution regions, and one locked,
autograded cell per problem, worth its CPU checks' points, with partial credit: a call to the
installed grader, `graded("<problem>")`, with nothing to hide (no hidden-tests region, whose
checksum nbgrader records before stripping it and then warns about: nbgrader issue #1961).
CUDA checks are left out of the notebooks: points must not depend on the grading machine
(see docs/instructors.md).
"""
from __future__ import annotations

import ast

import nbformat

from ..judge.checks import CHECKS
from .. import solution_path
from ..problems import get
from ..model.stubs import docstring, render

MARKER = "# attnkit: {pid} (keep this first line: it tells the grader which cell holds your code)"
HEADER_IMPORTS = "from ."  # relative imports: replaced by the notebook's own cells


def cell_source(problem, solution: str | None = None) -> str:
    """The implementation cell: the stub without its module docstring and relative imports; with
    `solution` ("regions" or "plain"), every method body is the reference's (in nbgrader regions)."""
    text = render(problem)
    body = text[text.index('"""', 3) + 3:].lstrip("\n")  # drop the module docstring
    body = "\n".join(line for line in body.splitlines() if not line.startswith(HEADER_IMPORTS)).strip("\n")
    body = _squeeze_blank_lines(body)
    if solution:
        body = splice(body, solution_path(problem.id).read_text(), regions=solution == "regions")
    return MARKER.format(pid=problem.id) + "\n" + body + "\n"


def _squeeze_blank_lines(text: str) -> str:
    out, blank = [], 0
    for line in text.splitlines():
        blank = blank + 1 if not line.strip() else 0
        if blank <= 2:
            out.append(line)
    return "\n".join(out)


def _functions(source: str) -> list[tuple[str, ast.FunctionDef]]:
    """(qualified name, node) of the module's functions and its classes' methods."""
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            out.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            out += [(f"{node.name}.{f.name}", f) for f in node.body if isinstance(f, ast.FunctionDef)]
    return out


def _bodies(source: str) -> dict[str, list[str]]:
    """Qualified function name -> its body lines (after the docstring), from the reference."""
    lines, out = source.splitlines(), {}
    for name, f in _functions(source):
        stmts = f.body[1:] if ast.get_docstring(f) is not None else f.body
        out[name] = lines[stmts[0].lineno - 1: stmts[-1].end_lineno]
    return out


def _helpers(reference: str, names: set) -> list[str]:
    """The reference's module-level functions the stub does not have (a private `_phi`), whole, in order."""
    lines = reference.splitlines()
    out = []
    for node in ast.parse(reference).body:
        if isinstance(node, ast.FunctionDef) and node.name not in names:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            out += lines[first - 1: node.end_lineno] + ["", ""]
    return out


def splice(stub: str, reference: str, regions: bool = True) -> str:
    """Replace each stub method's `raise NotImplementedError` by the reference's body; the reference's own helper
    functions go before the stub's first function (in a solution region of their own)."""
    bodies, lines = _bodies(reference), stub.splitlines()
    targets = [(name, f.body[-1]) for name, f in _functions(stub)]
    helpers = _helpers(reference, {name for name, _ in targets})
    bodies = {name: body for name, body in bodies.items() if name in {n for n, _ in targets} or "." in name}
    if {name for name, _ in targets} != set(bodies):
        raise ValueError(f"the reference defines {sorted(bodies)}, the stub {sorted(n for n, _ in targets)}")
    for name, stmt in sorted(targets, key=lambda t: -t[1].lineno):  # bottom-up keeps line numbers valid
        indent = " " * stmt.col_offset
        new = (([f"{indent}### BEGIN SOLUTION"] if regions else []) + bodies[name]
               + ([f"{indent}### END SOLUTION"] if regions else []))
        lines[stmt.lineno - 1: stmt.end_lineno] = new
    if helpers:
        first = min(f.lineno for _, f in _functions(stub)) - 1
        lines[first:first] = (["### BEGIN SOLUTION"] if regions else []) + helpers[:-2] + (
            ["### END SOLUTION"] if regions else []) + ["", ""]
    return "\n".join(lines)


def _meta(grade_id: str, *, solution=False, grade=False, locked=True, points=None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


WORDS = {  # the notebooks' own sentences; the problem's from its localized spec (grader/model/i18n.py)
    "requires": {"en": "Your {deps} goes in the first code cell (copy it from its own notebook); the next cell is this "
                       "problem.\n",
                 "zh": "第一个代码单元放你的 {deps}（从它自己的 notebook 复制过来）；下一个单元是本题。\n"},
    "stuck": {"en": "Stuck? `attnkit hint {pid}` in a terminal reveals hints one level at a time.",
              "zh": "卡住了？在终端运行 `attnkit hint {pid} --lang zh`，提示会一级一级地显示。"},
    "quick": {"en": "## Quick checks\nShapes and weight sums on one small fixed example.",
              "zh": "## 快速检查\n在一个固定的小例子上检查形状和权重之和。"},
    "graded": {"en": "## Graded checks\nThe cell below runs every hidden check of this problem ({points} points): "
                     "each check's points count, so a partly right answer gets part of them.",
               "zh": "## 计分检查\n下面的单元运行本题的全部隐藏检查（共 {points} 分）：每项检查的分数分别计入，部分正确也能得到部分分数。"},
    "full": {"en": "## Full grading\nThe same hidden checks and table as `attnkit grade`.",
             "zh": "## 完整评分\n与 `attnkit grade` 相同的隐藏检查和结果表。"},
    "weights": {"en": "## Attention weights\nYour weights on a fixed example; the reference's beside them once you pass.",
                "zh": "## 注意力权重\n你在固定例子上的权重；通过后，参考解答的权重会显示在旁边。"},
}


def _say(key: str, lang: str, **fields) -> str:
    return WORDS[key][lang].format(**fields)


def statement(problem) -> str:
    parts = [f"# {problem.title}\n\n{problem.summary}\n"]
    if problem.class_doc:
        parts.append(f"`class {problem.symbol}(nn.Module)`: {problem.class_doc}\n")
    for m in problem.methods:
        parts.append(f"```python\n{m.signature}\n{docstring(m, '    ')}```\n")
    if problem.requires:
        parts.append(_say("requires", problem.lang, deps="`" + "`, `".join(problem.requires) + "`"))
    parts.append(_say("stuck", problem.lang, pid=problem.id))
    return "\n".join(parts)


def build(pid: str, kind: str, solution: str | None = None, lang: str = "en") -> nbformat.NotebookNode:
    """kind: "learner" (notebooks/) or "source" (nbgrader). solution: None, "regions" or "plain".
    lang: the language of the statement, hints, docstrings and headings."""
    return _build(get(pid, lang), kind, solution)


def _build(problem, kind: str, solution: str | None) -> nbformat.NotebookNode:
    pid = problem.id
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    source = kind == "source"
    cells = []

    def add(kind_, text, meta=None):
        cell = (nbformat.v4.new_markdown_cell if kind_ == "md" else nbformat.v4.new_code_cell)(text)
        cell.id = f"{pid}-{len(cells)}"
        if source and meta:
            cell.metadata.update(meta)
        cells.append(cell)

    add("md", statement(problem), _meta(f"statement_{pid}"))
    add("code", "from attnkit.integrations.notebook import start\n\nstart()  # attnkit's grader warms up in the background",
        _meta(f"start_{pid}"))
    for dep in problem.requires + (pid,):
        add("code", cell_source(get(dep, problem.lang), solution), _meta(f"impl_{dep}", solution=True, locked=False))
    add("md", _say("quick", problem.lang), _meta(f"quick_md_{pid}"))
    add("code", f'from attnkit.integrations.notebook import quick_check\n\nquick_check("{pid}")', _meta(f"quick_{pid}"))
    if source:  # one graded cell: the problem's CPU checks, with partial credit; nothing in it to hide
        points = sum(v for cid, v in problem.points.items() if not CHECKS[cid].needs_cuda)
        add("md", _say("graded", problem.lang, points=points), _meta(f"graded_md_{pid}"))
        add("code", f"# attnkit graded cell: {pid} ({points} points)\nfrom attnkit.integrations.notebook import graded\n\n"
                    f"graded(\"{pid}\")", _meta(f"graded_{pid}", grade=True, points=points))
    else:
        add("md", _say("full", problem.lang))
        add("code", f'from attnkit.integrations.notebook import grade_here\n\ngrade_here("{pid}")')
    if problem.weights_index is not None:  # a heatmap of the weights, where the problem returns them
        add("md", _say("weights", problem.lang), _meta(f"weights_md_{pid}"))
        add("code", f'from attnkit.integrations.notebook import show_weights\n\nshow_weights("{pid}")', _meta(f"weights_{pid}"))
    nb.cells = cells
    return nb


def text(nb) -> str:
    return nbformat.writes(nb) + "\n"
