"""A report as a few typed blocks, rendered to Markdown or to one self-contained HTML page (no script, no external
resource). The kit's own words are plain `str`; anything that may be the candidate's (a file name, code, a message)
is `Code` (inline) or `Fence` (a block): in Markdown a code span or fence no text can close, in HTML escaped."""
from __future__ import annotations

import html
import re
from dataclasses import dataclass

from ..run.inbox import one_line


@dataclass(frozen=True)
class Code:
    """Inline text that may be hostile: one line, bounded."""
    text: str
    limit: int = 200


@dataclass(frozen=True)
class Strong:
    text: str  # the kit's words


Inline = "str | Code | Strong | list"


@dataclass(frozen=True)
class Heading:
    text: object  # Inline
    id: str  # the section's anchor (HTML), the kit's own word
    level: int = 2


@dataclass(frozen=True)
class Para:
    text: object


@dataclass(frozen=True)
class Bullets:
    items: list


@dataclass(frozen=True)
class Table:
    header: list
    rows: list


@dataclass(frozen=True)
class Fence:
    """A block of text that may be hostile (code, a message), shown verbatim."""
    text: str
    lang: str = ""


def code(text: str, limit: int = 200) -> str:
    """Text that may be the candidate's as an inline Markdown code span no text can close or leave: on one line,
    without control characters, between backtick runs longer than any inside (CommonMark), padded with a space where
    it starts or ends with a backtick. Markdown and HTML inside a code span stay literal."""
    text = one_line(text, limit) or "(none)"
    ticks = "`" * (max(map(len, re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fenced(text: str, lang: str = "") -> list[str]:
    """A Markdown code block no text can close: the fence is longer than any run of backticks inside."""
    fence = "`" * max(3, max(map(len, re.findall(r"`+", text)), default=0) + 1)
    return [fence + lang, text, fence]


def _md(x, cell: bool = False) -> str:
    if isinstance(x, list):
        return "".join(_md(y, cell) for y in x)
    if isinstance(x, Code):
        out = code(x.text, x.limit)
        return out.replace("|", "\\|") if cell else out  # GFM: a pipe in a cell, even in a code span, is escaped
    if isinstance(x, Strong):
        return f"**{x.text}**"
    return str(x).replace("|", "\\|") if cell else str(x)


def markdown(title: str, blocks: list) -> str:
    lines = [f"# {title}", ""]
    for b in blocks:
        if isinstance(b, Heading):
            lines += ["#" * b.level + " " + _md(b.text), ""]
        elif isinstance(b, Para):
            lines += [_md(b.text), ""]
        elif isinstance(b, Bullets):
            lines += [f"- {_md(i)}" for i in b.items] + [""]
        elif isinstance(b, Table):
            lines += ["| " + " | ".join(_md(h, True) for h in b.header) + " |", "|" + "---|" * len(b.header)]
            lines += ["| " + " | ".join(_md(c, True) for c in row) + " |" for row in b.rows] + [""]
        elif isinstance(b, Fence):
            lines += [*fenced(b.text, b.lang), ""]
    return "\n".join(lines)


def _html(x) -> str:
    if isinstance(x, list):
        return "".join(_html(y) for y in x)
    if isinstance(x, Code):
        return f"<code>{html.escape(one_line(x.text, x.limit) or '(none)')}</code>"
    if isinstance(x, Strong):
        return f"<strong>{html.escape(x.text)}</strong>"
    return html.escape(str(x))


STYLE = ("body{font-family:sans-serif;max-width:64em;margin:2em auto;padding:0 1em}table{border-collapse:collapse}"
         "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}pre{background:#f6f6f6;padding:.6em;"
         "overflow-x:auto;white-space:pre}")


def page(title: str, blocks: list) -> str:
    out = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f'<h{b.level} id="{html.escape(b.id)}">{_html(b.text)}</h{b.level}>')
        elif isinstance(b, Para):
            out.append(f"<p>{_html(b.text)}</p>")
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{_html(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Table):
            head = "".join(f"<th>{_html(h)}</th>" for h in b.header)
            rows = "".join("<tr>" + "".join(f"<td>{_html(c)}</td>" for c in row) + "</tr>" for row in b.rows)
            out.append(f"<table><tr>{head}</tr>{rows}</table>")
        elif isinstance(b, Fence):
            out.append(f"<pre><code>{html.escape(b.text)}</code></pre>")
    body = "\n".join(out)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'">'
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>\n<h1>{html.escape(title)}</h1>\n"
            f"{body}\n</body></html>\n")
