"""The class report's HTML page: static, readable with scripts off, every result's text escaped.

Everything is in the HTML as served: the tables, the roster, each student's section. One small inline script makes
the tables sortable by a click on a header (progressive enhancement: without it the page reads the same). The page's
Content-Security-Policy admits that script and the style block by their hashes, images only as data: URIs, and
nothing else: no other script runs, even one a result's text managed to smuggle in, and nothing is fetched.
"""
from __future__ import annotations

import base64
import hashlib
import html
import os
from pathlib import Path
from urllib.parse import quote

from .class_stats import STATUSES
from .sortable import SCRIPT, STYLE

RANK = {"passed": 3, "failed": 2, "did not load": 1, "not started": 0}  # a status cell's sort key (plus its share)


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


CSP = (f"default-src 'none'; img-src data:; style-src {_hash(STYLE)}; script-src {_hash(SCRIPT)}; base-uri 'none'; "
       "form-action 'none'")
e = html.escape


def _pct(x) -> tuple[str, str]:
    """(shown, sort key) of a share that may be None (nobody started it)."""
    return ("-", "-1") if x is None else (f"{100 * x:.0f}%", f"{x:.4f}")


def _table(head: list[str], rows: list[str], empty: str) -> str:
    ths = "".join(f"<th>{h}</th>" for h in head)
    body = "".join(rows) or f"<tr><td colspan='{len(head)}'>{empty}</td></tr>"
    return f"<div class='wide'><table class='sortable'><thead><tr>{ths}</tr></thead><tbody>{body}</tbody></table></div>"


def _td(text: str, key=None, cls: str | None = None) -> str:
    attrs = (f" data-sort='{e(str(key))}'" if key is not None else "") + (f" class='{cls}'" if cls else "")
    return f"<td{attrs}>{text}</td>"


def page(s: dict, figures: dict[str, str], results: str, page_dir: Path | None = None) -> str:
    """The HTML page; `page_dir`: where it is written (the roster's links to each result file are relative to it)."""
    mean = sum(s["scores"]) / len(s["scores"]) if s["scores"] else 0.0
    median = sorted(s["scores"])[len(s["scores"]) // 2] if s["scores"] else 0.0
    anchors: dict = {}
    for i, r in enumerate(s["roster"]):
        anchors.setdefault(r["submission"], f"s-{i}")  # a name twice (two result files): links lead to the first
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<title>attnkit class report</title><style>{STYLE}</style></head><body>
<h1>attnkit class report</h1>
<p id="summary">{s['submissions']} submissions, {s['graded']} graded; mean score {mean:.1f}, median {median:g} of
{s['max_score']:g}. A problem a student has not begun is <em>not started</em>: it is counted apart, never as a failure,
and left out of every rate and mean. Click a table's header to sort it.</p>
<h2 id="roster">Roster</h2>
{_roster(s, anchors, results, page_dir)}
<h2 id="scores">Score distribution</h2><img alt="histogram of the scores" src="{figures['scores']}">
<h2 id="problems">Problems: started, passed, failed, not started</h2>
<img alt="each problem's submissions by status" src="{figures['problems']}">
{_problems(s)}
<h2 id="checks">Pass rate per check, among the submissions that started its problem (hardest first)</h2>
{_checks(s)}
<h2 id="mistakes">Most frequent named mistakes</h2>
{_table(["problem", "mistake", "students"], [f"<tr>{_td(e(p))}{_td(e(m))}{_td(str(n), n)}</tr>"
        for p, made in s["mistakes"].items() for m, n in made], "No mistake was recognised.")}
<h2 id="troubles">Did not grade: crashed, timed out, hostile, did not load, not graded</h2>
{_troubles(s, anchors)}
<h2 id="similarity">Similarity</h2>
{_similar(s.get("similar"), results, anchors)}
<h2 id="students">Each student</h2>
{"".join(_student(r, f"s-{i}") for i, r in enumerate(s["roster"]))}
<script>{SCRIPT}</script>
</body></html>
"""


def _problem_ids(s: dict) -> list[str]:
    return list(s["problems"])


def _link(name: str, anchors: dict) -> str:
    return f"<a href='#{anchors[name]}'>{e(name)}</a>" if name in anchors else e(name)


def _roster(s: dict, anchors: dict, results: str, page_dir: Path | None) -> str:
    pids = _problem_ids(s)
    legend = "; ".join(f"{i + 1}: {e(p)}" for i, p in enumerate(pids))
    head = ["submission", "score"] + [f"<abbr title='{e(p)}'>{i + 1}</abbr>" for i, p in enumerate(pids)] + ["result"]
    rows = []
    for r in s["roster"]:
        cells = [_td(_link(r["submission"], anchors)),
                 _td(f"{r['score']:g} / {r['max_score']:g}" if r["score"] is not None else "not graded",
                     r["score"] if r["score"] is not None else -1)]
        for pid in pids:
            p = r["problems"].get(pid)
            if p is None:
                cells.append(_td("-", -1))
                continue
            share = p["score"] / p["max_score"] if p["max_score"] else 0.0
            shown = f"failed {p['score']:g}/{p['max_score']:g}" if p["status"] == "failed" else p["status"]
            cells.append(_td(e(shown), RANK[p["status"]] + 0.99 * share, p["status"].replace(" ", "-")))
        href = _href(Path(results) / r["file"], page_dir) if r.get("file") else None
        cells.append(_td(f"<a href='{e(href)}'>JSON</a>" if href else ""))
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f"<p>Problems by number: {legend}. Each student's name leads to their section below.</p>" + \
        _table(head, rows, "No submission.")


def _href(target: Path, page_dir: Path | None) -> str:
    """A link from the page to `target`, relative (the page and the results move together), URL-quoted."""
    path = os.path.relpath(target.resolve(), page_dir.resolve()) if page_dir is not None else str(target)
    return quote(Path(path).as_posix())


def _problems(s: dict) -> str:
    rows = []
    for i, (pid, v) in enumerate(s["problems"].items()):
        rate, mean, hard = _pct(v["rate"]), _pct(v["mean"]), _pct(v["difficulty"])
        rows.append("<tr>" + _td(e(pid), i) + "".join(_td(str(v[k]), v[k]) for k in ("started", *STATUSES))
                    + _td(rate[0], rate[1]) + _td(mean[0], mean[1]) + _td(hard[0], hard[1]) + "</tr>")
    head = ["problem", "started", "passed", "failed", "did not load", "not started", "pass rate (of started)",
            "mean score (of started)", "difficulty (points missed)"]
    return _table(head, rows, "No problem was graded.")


def _checks(s: dict) -> str:
    ordered = sorted(s["checks"].items(), key=lambda kv: (kv[1]["rate"], kv[0]))
    rows = []
    for k, v in ordered:
        passed = f"{v['passed']} / {v['graded']}"
        rows.append(f"<tr>{_td(e(k))}{_td(passed, v['passed'])}{_td(_pct(v['rate'])[0], v['rate'])}</tr>")
    return _table(["check", "passed / started", "rate"], rows, "No student started any problem.")


def _troubles(s: dict, anchors: dict) -> str:
    rows = [f"<tr>{_td(_link(t['submission'], anchors))}{_td(e(t['kind']))}{_td(e(t['problem']))}"
            f"{_td(e(t['detail']))}</tr>" for t in s["troubles"]]
    return _table(["submission", "what happened", "problem", "detail"], rows,
                  "None: every submission was graded normally.")


def _similar(found: list | None, results: str, anchors: dict) -> str:
    """The pairs `attnkit similarity RESULTS --json RESULTS/similarity.json` listed, or how to list them."""
    how = f"<p>Pairs of submissions whose code is suspiciously alike: <code>attnkit similarity {e(results)} --json " \
          f"{e(results)}/similarity.json</code> lists them, and this page shows them once that file exists.</p>"
    if found is None:
        return how
    rows = []
    for f in found:
        share = f.get("similarity", 0)
        share = float(share) if isinstance(share, (int, float)) else 0.0
        rows.append(f"<tr>{_td(_link(str(f.get('a')), anchors))}{_td(_link(str(f.get('b')), anchors))}"
                    f"{_td(f'{100 * share:.0f}%', share)}</tr>")
    return "<p>From similarity.json (<code>attnkit similarity</code>); each name leads to that student's section.</p>" \
        + _table(["submission", "submission", "alike"], rows, "No pair reached the threshold.")


def _student(r: dict, anchor: str) -> str:
    """One student's section: each problem's status and score, and each failed check's message (escaped, capped)."""
    title = f"<h3 id='{anchor}'>{e(r['submission'])}: " + \
        (f"{r['score']:g} / {r['max_score']:g}</h3>" if r["score"] is not None else "not graded</h3>")
    if r["score"] is None:
        return title + f"<p>{e(r['error'] or '')}</p>"
    rows = []
    for pid, p in r["problems"].items():
        lost = "".join(f"<pre>{e(c['id'])}: {e(c['message'])}</pre>" for c in p.get("failing", []))
        score = f"{p['score']:g} / {p['max_score']:g}"
        rows.append(f"<tr>{_td(e(pid))}{_td(e(p['status']), None, p['status'].replace(' ', '-'))}"
                    f"{_td(score, p['score'])}{_td(lost)}</tr>")
    return title + _table(["problem", "status", "score", "failed checks"], rows, "No problem in this result.")
