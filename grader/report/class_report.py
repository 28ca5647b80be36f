"""attnkit class-report: what a class's grade-batch results say, as one self-contained HTML page (or JSON).

Sections: the score distribution; each problem's pass rate and each check's; the named mistakes most
often made per problem, with how many students made each; the submissions that crashed, timed out,
sent hostile messages or could not be graded; and where the similarity listing comes from. Plots are
matplotlib PNGs embedded as data URIs, so the page opens offline. Every text from a result file
(names, messages) is untrusted and HTML-escaped.
"""
from __future__ import annotations

import base64
import html
import io
import json
from collections import Counter
from pathlib import Path

from ..errors import BadInput

KINDS = {  # a problem's `trouble` (the grader's own field: results.TROUBLES) as this page names it; not_started is
    "timeout": "timed out",  # left out: it is the problem's status already, in every pass rate
    "crash": "crashed",
    "hostile": "hostile",
    "error": "grader error",
}
TOP = 5  # mistakes listed per problem
MAX_BYTES = 50 << 20  # read of one result file (a cut-off file is not JSON: an error row)


def load(results: Path) -> list[dict]:
    """Every result grade-batch wrote in `results` (one JSON per submission), in name order."""
    if not results.is_dir():
        raise BadInput(f"{results}: not a results folder (what `attnkit grade-batch --out` writes)")
    rows = []
    for f in sorted(results.glob("*.json")):
        if f.name in ("source.json", "similarity.json") or f.is_symlink():
            continue
        try:
            with open(f, "rb") as handle:
                data = json.loads(handle.read(MAX_BYTES))
        except (OSError, ValueError):
            rows.append({"submission": f.stem, "error": "its result file is not JSON"})
            continue
        if isinstance(data, dict) and isinstance(data.get("submission", f.stem), str):
            rows.append(data)
    if not rows:
        raise BadInput(f"{results}: no results in it (run `attnkit grade-batch SUBMISSIONS --out {results}` first)")
    return rows


def stats(rows: list[dict]) -> dict:
    """The numbers on the page: scores, pass rates, mistakes, troubles."""
    graded = [r for r in rows if "error" not in r and isinstance(r.get("problems"), list)]
    problems: dict = {}
    checks: dict = {}
    mistakes: dict = {}
    troubles = [{"submission": str(r.get("submission", "?")), "kind": "not graded", "problem": "",
                 "detail": str(r.get("error", ""))[:300]} for r in rows if r not in graded]
    for r in graded:
        for p in r["problems"]:
            pid = str(p.get("id"))
            entry = problems.setdefault(pid, {"graded": 0, "passed": 0})
            entry["graded"] += 1
            entry["passed"] += p.get("status") == "passed"
            for c in p.get("checks", []):
                if c.get("status") in ("skipped", "error"):
                    continue
                key = f"{pid}: {c.get('id')}"
                ce = checks.setdefault(key, {"graded": 0, "passed": 0})
                ce["graded"] += 1
                ce["passed"] += c.get("status") == "passed"
            made = {c["mistake"] for c in p.get("checks", []) if isinstance(c.get("mistake"), str)}
            mistakes.setdefault(pid, Counter()).update(made)  # a student counts once per mistake
            kind = _trouble(p)
            if kind:
                troubles.append({"submission": str(r.get("submission", "?")), "kind": kind, "problem": pid,
                                 "detail": ""})
    scores = [float(r["score"]) for r in graded if isinstance(r.get("score"), (int, float))]
    top = max((float(r.get("max_score", 0)) for r in graded), default=0.0)
    return {
        "submissions": len(rows), "graded": len(graded), "scores": scores, "max_score": top,
        "problems": {pid: {**v, "rate": v["passed"] / v["graded"]} for pid, v in problems.items()},
        "checks": {k: {**v, "rate": v["passed"] / v["graded"]} for k, v in checks.items()},
        "mistakes": {pid: c.most_common(TOP) for pid, c in mistakes.items() if c},
        "troubles": troubles,
    }


def _read_similar(path: Path) -> list | None:
    """The pairs of a similarity.json, or None where there is none (or it is not what `attnkit similarity` writes)."""
    try:
        pairs = json.loads(path.read_text())["pairs"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [p for p in pairs if isinstance(p, dict)] if isinstance(pairs, list) else None


def _trouble(problem: dict) -> str | None:
    """How the grader itself ended the problem's grading (the result's `trouble` field), never words of a message:
    a learner's exception message may hold any line the grader writes. A result without the field (an older kit's)
    shows no trouble."""
    trouble = problem.get("trouble")
    return KINDS.get(trouble) if isinstance(trouble, str) else None


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def plots(s: dict) -> dict[str, str]:
    """The figures as data URIs: the score histogram, and the problems' pass rates."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    out = {}
    fig, ax = plt.subplots(figsize=(6, 3), constrained_layout=True)
    top = max(1.0, s["max_score"])
    ax.hist(s["scores"], bins=min(20, max(1, int(top))), range=(0, top), color="#4472c4", edgecolor="white")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(f"score (out of {s['max_score']:g})")
    ax.set_ylabel("submissions")
    out["scores"] = _png(fig)
    plt.close(fig)
    names = list(s["problems"])
    fig, ax = plt.subplots(figsize=(6, 0.35 * len(names) + 1), constrained_layout=True)
    ax.barh(names[::-1], [100 * s["problems"][n]["rate"] for n in names[::-1]], color="#70ad47")
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of graded submissions passing every check")
    out["problems"] = _png(fig)
    plt.close(fig)
    return out


def page(s: dict, figures: dict[str, str], results: str) -> str:
    """The HTML page (no script, no external resource)."""
    e = html.escape
    mean = sum(s["scores"]) / len(s["scores"]) if s["scores"] else 0.0
    median = sorted(s["scores"])[len(s["scores"]) // 2] if s["scores"] else 0.0
    rows = "".join(f"<tr><td>{e(p)}</td><td>{v['passed']} / {v['graded']}</td><td>{100 * v['rate']:.0f}%</td></tr>"
                   for p, v in s["problems"].items())
    checks = "".join(f"<tr><td>{e(k)}</td><td>{v['passed']} / {v['graded']}</td><td>{100 * v['rate']:.0f}%</td></tr>"
                     for k, v in sorted(s["checks"].items(), key=lambda kv: (kv[1]["rate"], kv[0])))
    mistakes = "".join(f"<tr><td>{e(p)}</td><td>{e(m)}</td><td>{n}</td></tr>"
                       for p, made in s["mistakes"].items() for m, n in made) or \
        "<tr><td colspan='3'>No mistake was recognised.</td></tr>"
    troubles = "".join(f"<tr><td>{e(t['submission'])}</td><td>{e(t['kind'])}</td><td>{e(t['problem'])}</td>"
                       f"<td>{e(t['detail'])}</td></tr>" for t in s["troubles"]) or \
        "<tr><td colspan='4'>None: every submission was graded normally.</td></tr>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>attnkit class report</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.2em .6em;text-align:left}}</style></head><body>
<h1>attnkit class report</h1>
<p id="summary">{s['submissions']} submissions, {s['graded']} graded; mean score {mean:.1f}, median {median:g} of
{s['max_score']:g}.</p>
<h2 id="scores">Score distribution</h2><img alt="histogram of the scores" src="{figures['scores']}">
<h2 id="problems">Pass rate per problem</h2><img alt="pass rate per problem" src="{figures['problems']}">
<table><tr><th>problem</th><th>passed</th><th>rate</th></tr>{rows}</table>
<h2 id="checks">Pass rate per check (hardest first)</h2>
<table><tr><th>check</th><th>passed</th><th>rate</th></tr>{checks}</table>
<h2 id="mistakes">Most frequent named mistakes</h2>
<table><tr><th>problem</th><th>mistake</th><th>students</th></tr>{mistakes}</table>
<h2 id="troubles">Crashed, timed out, hostile or not graded</h2>
<table><tr><th>submission</th><th>what happened</th><th>problem</th><th>detail</th></tr>{troubles}</table>
<h2 id="similarity">Similarity</h2>
{_similar(s.get("similar"), results)}
</body></html>
"""


def _similar(found: list | None, results: str) -> str:
    """The pairs `attnkit similarity RESULTS --json RESULTS/similarity.json` listed, or how to list them."""
    e = html.escape
    how = f"<p>Pairs of submissions whose code is suspiciously alike: <code>attnkit similarity {e(results)} --json " \
          f"{e(results)}/similarity.json</code> lists them, and this page shows them once that file exists.</p>"
    if found is None:
        return how
    rows = "".join(f"<tr><td>{e(str(f.get('a')))}</td><td>{e(str(f.get('b')))}</td>"
                   f"<td>{100 * float(f.get('similarity', 0)):.0f}%</td></tr>" for f in found) or \
        "<tr><td colspan='3'>No pair reached the threshold.</td></tr>"
    return f"<p>From similarity.json (<code>attnkit similarity</code>):</p><table><tr><th>submission</th>" \
           f"<th>submission</th><th>alike</th></tr>{rows}</table>"


def write(results, out=None, json_out=None) -> dict:
    """Read `results`, write the page to `out` and the numbers to `json_out` (either may be None); the numbers."""
    from ..files import atomic_write

    results = Path(results)
    s = stats(load(results))
    s["similar"] = _read_similar(results / "similarity.json")
    if out is not None:
        atomic_write(Path(out), page(s, plots(s), str(results)))
    if json_out is not None:
        atomic_write(Path(json_out), json.dumps(s, indent=2) + "\n")
    return s
