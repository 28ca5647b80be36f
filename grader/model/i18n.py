"""Two languages, English and Simplified Chinese: `--lang zh|en` or ATTNKIT_LANG chooses, at the edge.

The language is a value passed down: the CLI resolves it once (`--lang`, else $ATTNKIT_LANG, else en) and hands it
to `problems.get(pid, lang)`, `word(key, lang)`, the notebooks' `build(..., lang=)`; a localized spec carries its
own `lang`, so the code it is handed to (diagnose.describe) speaks the same language without asking.

Catalogues. The English texts are the specs themselves (grader/problems/<id>.py). Each other language keeps its
texts in a catalogue beside them, one JSON file per problem, grader/problems/<lang>/<id>.json:

    {"title": "...", "summary": "...", "class_doc": "..." (module problems only),
     "hints": ["...", ...] (one per hint), "statements": ["...", ...] (one per method),
     "shared": ["dropout", ...] (optional: groups of grader/problems/<lang>/_shared.json),
     "mistakes": {"<mistake id>": {"name": "...", "explain": "...", "hint": "..."}, ...}}

Mistakes that several specs share (grader/problems/_common.py) are translated once, in _shared.json
({"mistakes": {"<group>": {"<mistake id>": {...}}}}), and named by group in each catalogue that uses them.
`read_catalogue` reads one entry; grader/model/validate.py's `validate_translation` checks it against its spec
when the spec is first loaded (grader/problems/__init__.py): a missing text and a key that translates nothing in
the spec are each a SpecError naming the catalogue file and the key. The grader's own sentences that frame the
texts are in `WORDS`.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import os
import sys
from pathlib import Path

from ..errors import BadInput, SpecError

LANGS = ("en", "zh")
MISTAKE_TEXTS = ("name", "explain", "hint")
SHARED = "_shared.json"

WORDS = {
    "mistake": {"en": "Recognised mistake", "zh": "识别出的常见错误"},
    "why": {"en": "Why", "zh": "原因"},
    "fix": {"en": "Fix", "zh": "改法"},
    "imported": {"en": "in your {owner}, which {pid} imports", "zh": "在 {pid} 导入的你的 {owner} 里"},
    "nothing": {"en": "No catalogued mistake reproduces these results: compare what came back with what was expected in "
                      "each check.",
                "zh": "目录中没有哪个常见错误能重现这些结果：请对照每项检查中返回的值和期望的值。"},
    "explains": {"en": "It explains these failing checks:", "zh": "它解释了下面这些未通过的检查："},
    "shows": {"en": "What the results show", "zh": "结果显示"},
    "unexplained": {"en": "Failing checks no catalogued mistake explains: {checks}.",
                    "zh": "目录中的常见错误解释不了的未通过检查：{checks}。"},
    "same_note": {"en": "(what the results show: under {where}, above)", "zh": "（结果显示的情况：见上面的 {where}）"},
    "same_as": {"en": "Recognised mistake [{mid}]: the same as {where}, above.", "zh": "识别出的常见错误 [{mid}]：与上面的 {where} 相同。"},
    "also": {"en": "It also explains: {checks}.", "zh": "它也解释了：{checks}。"},
    "hint": {"en": "Hint {i}/{n} for {pid}: {text}", "zh": "{pid} 的提示 {i}/{n}：{text}"},
    "next_hint": {"en": "(`attnkit hint {pid}` again for the next one)", "zh": "（再运行 `attnkit hint {pid}` 看下一条）"},
    "last_hint": {"en": "(that was the last hint; `attnkit solution {pid}` shows the reference once your code passes)",
                  "zh": "（这是最后一条提示；代码通过后，`attnkit solution {pid}` 会显示参考解答）"},
}


def check(lang: str) -> str:
    if lang not in LANGS:
        raise BadInput(f"unknown language {lang!r}; choose from: {', '.join(LANGS)}")
    return lang


_warned: set[str] = set()


def from_env(warn: bool = False) -> str:
    """$ATTNKIT_LANG when it names a language (a locale's form too: zh_CN.UTF-8 is zh), else English: the default
    the edge (the CLI, the pytest plugin) starts from. A value that names none is English; where `warn` (the edges),
it says so once, in one line on stderr."""
    raw = os.environ.get("ATTNKIT_LANG", "en").strip()
    lang = raw.lower().replace("-", "_").split(".")[0].split("_")[0] or "en"
    if lang in LANGS:
        return lang
    if warn and raw not in _warned:
        _warned.add(raw)
        print(f"attnkit: ATTNKIT_LANG={raw[:40]!r} is not a language of attnkit (choose from: {', '.join(LANGS)}); "
              "using English", file=sys.stderr)
    return "en"


_ambient: contextvars.ContextVar[str | None] = contextvars.ContextVar("attnkit_lang", default=None)


def ambient() -> str:
    """The language of a caller that passes none to problems.get (grading.py, the integrations that take no
    language yet): the innermost `using`, else $ATTNKIT_LANG, else English. Everything else is passed a language."""
    return _ambient.get() or from_env()


@contextlib.contextmanager
def using(lang: str):
    """Run a block whose callers of problems.get pass no language (grading.grade) in `lang`."""
    token = _ambient.set(check(lang))
    try:
        yield
    finally:
        _ambient.reset(token)


def word(key: str, lang: str, **fields) -> str:
    return WORDS[key][lang].format(**fields)


def read_catalogue(folder: Path, pid: str, lang: str, shown: str = "grader/problems") -> dict:
    """The catalogue entry of `pid` in `lang` (folder/<lang>/<pid>.json), with the shared groups it names merged
    into its mistakes. Not checked against the spec here: validate.validate_translation does that. `shown`: how
    messages name `folder`."""
    where = f"translations {shown}/{lang}/{pid}.json"
    entry = _read_json(folder / lang / f"{pid}.json", where, f" (spec grader/problems/{pid}.py needs its {lang} texts)")
    groups = entry.pop("shared", [])
    if not groups:
        return entry
    shared_where = f"translations {shown}/{lang}/{SHARED}"
    if not isinstance(groups, list):
        raise SpecError(f"{where}: key 'shared' must list groups of {shared_where}'s 'mistakes'")
    shared = _read_json(folder / lang / SHARED, shared_where, f" ({where} names its groups {groups})").get("mistakes")
    if not isinstance(shared, dict):
        raise SpecError(f"{shared_where}: key 'mistakes' must map group names to mistakes")
    mistakes = entry.setdefault("mistakes", {})
    for group in groups:
        if group not in shared or not isinstance(shared[group], dict):
            raise SpecError(f"{where}: key 'shared' names unknown group {group!r} (known: {', '.join(shared)})")
        for mid, texts in shared[group].items():
            if not isinstance(texts, dict) or set(texts) != set(MISTAKE_TEXTS):
                raise SpecError(f"{shared_where}: key 'mistakes.{group}.{mid}' must hold exactly "
                                f"{', '.join(MISTAKE_TEXTS)}")
            if mid in mistakes:
                raise SpecError(f"{where}: key 'mistakes.{mid}' is also in group {group!r} of {shared_where} "
                                f"(one home per text: drop one)")
            mistakes[mid] = texts
    return entry


def _read_json(path: Path, where: str, why: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"{where} is missing{why}") from None
    except (OSError, ValueError) as exc:
        raise SpecError(f"{where} does not load: {exc}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{where} holds a {type(data).__name__}, not an object of texts")
    return data


def localize(problem, lang: str, entry: dict):
    """The problem with its texts in `lang`, from its catalogue entry (validated: it has every text the spec
    has). English is the spec itself."""
    if lang == "en":
        return problem
    methods = tuple(dataclasses.replace(m, statement=s) for m, s in zip(problem.methods, entry["statements"]))
    mistakes = tuple(dataclasses.replace(m, **{k: entry["mistakes"][m.id].get(k, getattr(m, k)) for k in MISTAKE_TEXTS})
                     for m in problem.mistakes)
    return dataclasses.replace(problem, title=entry["title"], summary=entry["summary"], hints=tuple(entry["hints"]),
                               class_doc=entry.get("class_doc", problem.class_doc), methods=methods,
                               mistakes=mistakes, lang=lang)
