"""English and Simplified Chinese: every text a learner reads from a spec exists in both, and
--lang / ATTNKIT_LANG choose it (statements, hints, mistake messages, notebooks)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import nbformat
import pytest

from conftest import SOLUTIONS, make_impl
from attnkit import ROOT
from attnkit.grading import grade
from attnkit.model.i18n import using
from attnkit.diagnose.mistakes import wrong_source
from attnkit.problems import all_problems, get

CJK = re.compile(r"[\u4e00-\u9fff]")


def _zh_texts(p):
    """(where, English, Chinese) for every translated text of a problem; a gap is a KeyError or None."""
    zh = p.zh or {}
    out = [("title", p.title, zh.get("title")), ("summary", p.summary, zh.get("summary"))]
    hints = zh.get("hints", ())
    assert len(hints) == len(p.hints), f"{p.id}: {len(hints)} Chinese hints for {len(p.hints)} English"
    out += [(f"hint {i}", en, z) for i, (en, z) in enumerate(zip(p.hints, hints), 1)]
    statements = zh.get("statements", ())
    assert len(statements) == len(p.methods), f"{p.id}: one Chinese statement per method"
    out += [(f"statement of {m.signature}", m.statement, z) for m, z in zip(p.methods, statements)]
    if p.class_doc:
        out.append(("class_doc", p.class_doc, zh.get("class_doc")))
    mistakes = zh.get("mistakes", {})
    assert set(mistakes) == {m.id for m in p.mistakes}, f"{p.id}: Chinese mistakes differ from the catalogue"
    for m in p.mistakes:
        assert len(mistakes[m.id]) == 3, f"{p.id}:{m.id} needs (name, explain, hint)"
        out += [(f"mistake {m.id} {part}", getattr(m, part), z) for part, z in zip(("name", "explain", "hint"), mistakes[m.id])]
    return out


@pytest.mark.parametrize("problem", all_problems(), ids=lambda p: p.id)
def test_every_text_has_a_chinese_translation(problem):
    for where, en, zh in _zh_texts(problem):
        assert isinstance(zh, str) and zh.strip(), f"{problem.id}: {where} has no Chinese text"
        assert CJK.search(zh), f"{problem.id}: {where} is not Chinese: {zh!r}"
        assert zh != en


def test_localized_specs_keep_everything_but_the_text():
    with using("zh"):
        for p in all_problems():
            assert p.title == p.zh["title"] and p.hints == tuple(p.zh["hints"])
    for p in all_problems():
        with using("zh"):
            zh = get(p.id)
        assert [m.patch for m in zh.mistakes] == [m.patch for m in p.mistakes]
        assert zh.points == p.points and [m.signature for m in zh.methods] == [m.signature for m in p.methods]


def _attnkit(*args, env=None, tmp_path):
    e = dict(os.environ, ATTNKIT_STATE=str(tmp_path / "state.json"), **(env or {}))
    return subprocess.run([sys.executable, "-m", "attnkit.fronts.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          env=e, timeout=300)


def test_hint_in_chinese_by_flag_and_by_environment(tmp_path):
    by_flag = _attnkit("hint", "additive", "--lang", "zh", tmp_path=tmp_path)
    assert by_flag.returncode == 0 and get("additive_attention").zh["hints"][0] in by_flag.stdout
    by_env = _attnkit("hint", "luong", env={"ATTNKIT_LANG": "zh"}, tmp_path=tmp_path)
    assert get("luong_attention").zh["hints"][0] in by_env.stdout and "提示" in by_env.stdout
    english = _attnkit("hint", "luong", "--lang", "en", env={"ATTNKIT_LANG": "zh"}, tmp_path=tmp_path)
    assert get("luong_attention").hints[1] in english.stdout  # the flag wins; the level advanced to 2
    bad = _attnkit("hint", "luong", "--lang", "fr", tmp_path=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_mistake_messages_in_chinese(tmp_path):
    problem = get("scaled_dot_product_attention")
    mistake = next(m for m in problem.mistakes if m.id == "mask_inverted")
    impl = make_impl(tmp_path, {f"{problem.id}.py": wrong_source(problem, mistake)})
    with using("zh"):
        report = grade(impl, [problem.id])
    named = [c for c in report.problems[0].checks if c.mistake == "mask_inverted"]
    name, explain, hint = problem.zh["mistakes"]["mask_inverted"]
    assert named and all(name in c.message and explain in c.message and hint in c.message for c in named)
    assert "识别出的常见错误" in named[0].message and report.problems[0].title == problem.zh["title"]


@pytest.mark.parametrize("problem", all_problems(), ids=lambda p: p.id)
def test_notebooks_exist_in_both_languages(problem):
    en = nbformat.read(ROOT / "notebooks" / f"{problem.id}.ipynb", as_version=4)
    zh = nbformat.read(ROOT / "notebooks" / "zh" / f"{problem.id}.ipynb", as_version=4)
    assert en.cells[0].source.startswith(f"# {problem.title}")
    assert zh.cells[0].source.startswith(f"# {problem.zh['title']}") and problem.zh["summary"] in zh.cells[0].source
    assert [c.cell_type for c in en.cells] == [c.cell_type for c in zh.cells]
    impl_cells = [c.source for c in zh.cells if c.source.startswith("# attnkit: ")]
    assert impl_cells and problem.zh["statements"][-1].splitlines()[0] in impl_cells[-1]


def test_solutions_untouched_by_language():
    with using("zh"):
        report = grade(SOLUTIONS)
    assert report.score == report.max_score
