"""Two languages, English and Simplified Chinese: `--lang zh|en` or ATTNKIT_LANG chooses.

Each spec keeps its Chinese next to its English (`zh=` in grader/problems/<id>.py): statements,
hints and the mistake catalogue. `localize` swaps them in; tests/test_i18n.py fails on any
missing or untranslated text. The grader's own sentences that frame them are in `WORDS`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os

from ..errors import BadInput

LANGS = ("en", "zh")
_chosen: list[str] = []

WORDS = {
    "mistake": {"en": "Recognised mistake", "zh": "识别出的常见错误"},
    "why": {"en": "Why", "zh": "原因"},
    "fix": {"en": "Fix", "zh": "改法"},
    "imported": {"en": "in your {owner}, which {pid} imports", "zh": "在 {pid} 导入的你的 {owner} 里"},
    "nothing": {"en": "No catalogued mistake reproduces these results: compare what came back with what was expected above.",
                "zh": "目录中没有哪个常见错误能重现这些结果：请对照上面返回的值和期望的值。"},
    "hint": {"en": "Hint {i}/{n} for {pid}: {text}", "zh": "{pid} 的提示 {i}/{n}：{text}"},
    "next_hint": {"en": "(`attnkit hint {pid}` again for the next one)", "zh": "（再运行 `attnkit hint {pid}` 看下一条）"},
    "last_hint": {"en": "(that was the last hint; `attnkit solution {pid}` shows the reference once your code passes)",
                  "zh": "（这是最后一条提示；代码通过后，`attnkit solution {pid}` 会显示参考解答）"},
}


def current() -> str:
    """The chosen language: set_lang / using, else ATTNKIT_LANG, else English."""
    if _chosen:
        return _chosen[-1]
    lang = os.environ.get("ATTNKIT_LANG", "en").strip().lower() or "en"
    return lang if lang in LANGS else "en"


def check(lang: str) -> str:
    if lang not in LANGS:
        raise BadInput(f"unknown language {lang!r}; choose from: {', '.join(LANGS)}")
    return lang


def set_lang(lang: str) -> None:
    _chosen[:] = [check(lang)]


@contextlib.contextmanager
def using(lang: str):
    _chosen.append(check(lang))
    try:
        yield
    finally:
        _chosen.pop()


def word(key: str, **fields) -> str:
    return WORDS[key][current()].format(**fields)


def localize(problem, lang: str):
    """The problem with its texts in `lang` (English is the spec itself)."""
    if lang == "en" or not problem.zh:
        return problem
    zh = problem.zh  # a gap falls back to English here; tests/test_i18n.py fails on it
    statements = list(zh.get("statements", ())) + [m.statement for m in problem.methods][len(zh.get("statements", ())):]
    methods = tuple(dataclasses.replace(m, statement=s) for m, s in zip(problem.methods, statements))
    mistakes = tuple(dataclasses.replace(m, **dict(zip(("name", "explain", "hint"), zh["mistakes"][m.id])))
                     if m.id in zh.get("mistakes", {}) else m for m in problem.mistakes)
    hints = tuple(zh.get("hints", ())) + problem.hints[len(zh.get("hints", ())):]
    return dataclasses.replace(problem, title=zh.get("title", problem.title), summary=zh.get("summary", problem.summary),
                               hints=hints, class_doc=zh.get("class_doc", problem.class_doc), methods=methods,
                               mistakes=mistakes)
