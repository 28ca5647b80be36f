"""English and Simplified Chinese: every text a learner reads from a spec exists in both, and
--lang / ATTNKIT_LANG choose it (statements, hints, mistake messages, notebooks)."""
from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

import nbformat
import pytest

from conftest import SOLUTIONS, grade_shared, make_impl
from attnkit import ROOT
from attnkit.model.i18n import using, word
from attnkit.diagnose.mistakes import wrong_source
from attnkit.problems import all_problems, get
from attnkit.report.feedback import problem_text

CJK = re.compile(r"[\u4e00-\u9fff]")


def _zh_texts(p):
    """(where, English, Chinese) for every translated text of a problem, from its catalogue entry
    (grader/problems/zh/<id>.json); the entry was checked against the spec when it loaded."""
    zh = get(p.id, "zh")
    out = [("title", p.title, zh.title), ("summary", p.summary, zh.summary)]
    out += [(f"hint {i}", en, z) for i, (en, z) in enumerate(zip(p.hints, zh.hints, strict=True), 1)]
    out += [(f"statement of {m.signature}", m.statement, z.statement) for m, z in zip(p.methods, zh.methods, strict=True)]
    if p.class_doc:
        out.append(("class_doc", p.class_doc, zh.class_doc))
    for m, z in zip(p.mistakes, zh.mistakes, strict=True):
        out += [(f"mistake {m.id} {part}", getattr(m, part), getattr(z, part)) for part in ("name", "explain", "hint")]
    return out


@pytest.mark.parametrize("problem", all_problems("en"), ids=lambda p: p.id)
def test_every_text_has_a_chinese_translation(problem):
    for where, en, zh in _zh_texts(problem):
        assert isinstance(zh, str) and zh.strip(), f"{problem.id}: {where} has no Chinese text"
        assert CJK.search(zh), f"{problem.id}: {where} is not Chinese: {zh!r}"
        assert zh != en


def test_localized_specs_keep_everything_but_the_text():
    for p in all_problems("en"):
        zh = get(p.id, "zh")
        assert zh.lang == "zh" and p.lang == "en"
        assert [m.patch for m in zh.mistakes] == [m.patch for m in p.mistakes]
        assert [m.id for m in zh.mistakes] == [m.id for m in p.mistakes]
        assert zh.points == p.points and [m.signature for m in zh.methods] == [m.signature for m in p.methods]
        assert zh == dataclasses.replace(p, **{f: getattr(zh, f) for f in ("title", "summary", "hints", "class_doc",
                                                                              "methods", "mistakes", "lang")})


def test_the_language_is_passed_not_ambient(monkeypatch):
    """get(pid, lang) answers for `lang` whatever the environment says; only a call that passes no language
    (grading.py's) follows `using`, else ATTNKIT_LANG."""
    monkeypatch.setenv("ATTNKIT_LANG", "zh")
    assert get("luong_attention", "en").title == "Luong attention" and get("luong_attention").lang == "zh"
    with using("en"):
        assert get("luong_attention", "zh").lang == "zh" and get("luong_attention").lang == "en"
    assert word("why", "zh") == "原因" and word("why", "en") == "Why"


def _attnkit(*args, env=None, tmp_path):
    e = dict(os.environ, ATTNKIT_STATE=str(tmp_path / "state.json"), **(env or {}))
    return subprocess.run([sys.executable, "-m", "attnkit.fronts.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          env=e, timeout=300)


def test_hint_in_chinese_by_flag_and_by_environment(tmp_path):
    by_flag = _attnkit("hint", "additive", "--lang", "zh", tmp_path=tmp_path)
    assert by_flag.returncode == 0 and get("additive_attention", "zh").hints[0] in by_flag.stdout
    by_env = _attnkit("hint", "luong", env={"ATTNKIT_LANG": "zh"}, tmp_path=tmp_path)
    assert get("luong_attention", "zh").hints[0] in by_env.stdout and "提示" in by_env.stdout
    english = _attnkit("hint", "luong", "--lang", "en", env={"ATTNKIT_LANG": "zh"}, tmp_path=tmp_path)
    assert get("luong_attention", "en").hints[1] in english.stdout  # the flag wins; the level advanced to 2
    bad = _attnkit("hint", "luong", "--lang", "fr", tmp_path=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_an_unknown_language_says_so_in_one_line_and_falls_back_to_english(tmp_path):
    r = _attnkit("hint", "luong", env={"ATTNKIT_LANG": "fr"}, tmp_path=tmp_path)
    assert r.returncode == 0 and get("luong_attention", "en").hints[0] in r.stdout
    assert r.stderr.strip() == "attnkit: ATTNKIT_LANG='fr' is not a language of attnkit (choose from: en, zh); using English"
    locale = _attnkit("hint", "luong", env={"ATTNKIT_LANG": "zh_CN.UTF-8"}, tmp_path=tmp_path)
    assert locale.stderr == "" and get("luong_attention", "zh").hints[1] in locale.stdout  # a locale's form names zh
    plugin = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--attnkit-impl",
                             str(SOLUTIONS), "--attnkit-problems", "masked_softmax", "-k", "shapes"], cwd=ROOT,
                            capture_output=True, text=True, env=dict(os.environ, ATTNKIT_LANG="fr"), timeout=300)
    assert plugin.returncode == 0, plugin.stdout + plugin.stderr
    assert (plugin.stdout + plugin.stderr).count("ATTNKIT_LANG='fr' is not a language of attnkit") == 1


def test_mistake_messages_in_chinese(tmp_path):
    problem = get("scaled_dot_product_attention", "en")
    mistake = next(m for m in problem.mistakes if m.id == "mask_inverted")
    impl = make_impl(tmp_path, {f"{problem.id}.py": wrong_source(problem, mistake)})
    with using("zh"):
        report = grade_shared(impl, [problem.id])
    named = [c for c in report.problems[0].checks if c.mistake == "mask_inverted"]
    zh = get(problem.id, "zh")
    m = next(m for m in zh.mistakes if m.id == "mask_inverted")
    with using("zh"):
        text = problem_text(report.problems[0])
    assert named and m.name in text and m.explain in text and m.hint in text
    assert text.count("识别出的常见错误") == 1 and report.problems[0].title == zh.title  # once for all its checks


@pytest.mark.parametrize("problem", all_problems("en"), ids=lambda p: p.id)
def test_notebooks_exist_in_both_languages(problem):
    en = nbformat.read(ROOT / "notebooks" / f"{problem.id}.ipynb", as_version=4)
    zh = nbformat.read(ROOT / "notebooks" / "zh" / f"{problem.id}.ipynb", as_version=4)
    assert en.cells[0].source.startswith(f"# {problem.title}")
    translated = get(problem.id, "zh")
    assert zh.cells[0].source.startswith(f"# {translated.title}") and translated.summary in zh.cells[0].source
    assert [c.cell_type for c in en.cells] == [c.cell_type for c in zh.cells]
    impl_cells = [c.source for c in zh.cells if c.source.startswith("# attnkit: ")]
    assert impl_cells and translated.methods[-1].statement.splitlines()[0] in impl_cells[-1]


def test_solutions_untouched_by_language():
    with using("zh"):
        report = grade_shared(SOLUTIONS)  # the expected values are the same in every language: the session's
    assert report.score == report.max_score
