"""attnkit grade-batch: grade every submission of a folder; results land as each one finishes.

One JSON report per submission in OUT/, and OUT/grades.csv (a row per submission, a column per
problem, the total), rewritten after each one. A re-run skips submissions already graded unless
--force, so an interrupted batch loses nothing. A bad submission gets one line and an error
row; the batch goes on. Grading runs in this one process (torch, the plans and the references
are loaded once), with N submissions graded at a time, each in its own sandboxed workers.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from ..files import atomic_write
from ..errors import BadInput
from ..problems import ORDER
from ..run.inbox import one_line
from .listing import submissions
from .one import grade_one


HASHED = re.compile(r"-[0-9a-f]{10}$")


def _name(path: Path) -> str:
    """A unique, stable result name for a submission: its file name (a zip keeps `.zip`, so `alice/` and
    `alice.zip` stay apart), and, where characters had to be replaced or the name shortened, a hash of the
    original (so `a b/` and `a_b/` stay apart too). A name that already ends as a hashed one does (`a_b-c8687a08aa`,
    chosen to land on `a b`'s results) is hashed as well: kept names never end that way, hashed ones always do."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", path.name)[:80]
    if safe == path.name and not HASHED.search(safe):
        return safe
    return f"{safe}-{hashlib.sha256(path.name.encode('utf-8', 'surrogateescape')).hexdigest()[:10]}"


def _names(subs) -> dict:
    """{submission: its result name}, no two alike (a counter after a clash of hashes, which _name makes the only
    way two could meet): a batch never merges two submissions into one row."""
    names, taken = {}, set()
    for p in sorted(subs, key=lambda p: p.name):
        name, n = _name(p), 1
        while name.casefold() in taken:  # casefolded: a file system that ignores case would merge them too
            n += 1
            name = f"{_name(p)}-{n}"
        taken.add(name.casefold())
        names[p] = name
    return names


def run(folder, out, workers: int = 2, force: bool = False, cluster: str | None = None, security=None,
        **grading) -> dict[str, dict]:
    """Grade every submission in `folder` (`grading`: grade()'s options; `attnkit grade-batch` sets sandbox=True):
    here, `workers` at a time, or on the Dask cluster whose scheduler is at `cluster` (integrations/cluster.py),
    connected with `security` (Dask's TLS settings; None: tcp:// to a scheduler on loopback)."""
    folder, out = Path(folder), Path(out)
    names, rows, todo = pending(folder, out, force)
    lock = threading.Lock()

    def record(p: Path, result: dict) -> None:
        result = {**result, "submission": p.name}
        write_json_dict(result, out / f"{names[p]}.json")
        with lock:
            rows[names[p]] = result
            write_csv(rows, out / "grades.csv")
        line = one_line(result["error"]) if "error" in result else f"{result['score']:g}/{result['max_score']:g}"
        print(f"{names[p]}: {line}", flush=True)

    if cluster is not None:
        from .cluster import grade_all

        grade_all(cluster, todo, record, grading, security)
    else:
        from ..judge.expected import References

        grading = {**grading, "references": References()}  # the reference's values computed once for the batch
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            for future in as_completed([pool.submit(lambda p: record(p, grade_one(p, grading)), p) for p in todo]):
                future.result()
    write_csv(rows, out / "grades.csv")
    return rows


def pending(folder: Path, out: Path, force: bool) -> tuple[dict, dict, list]:
    """The submissions' result names, the results already written (kept unless `force`), what is left to grade."""
    subs = submissions(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--out {out}: cannot create it ({exc.strerror})") from None
    write_json_dict({"submissions": str(folder.resolve())}, out / "source.json")  # `attnkit similarity OUT` reads it
    rows, names, todo = {}, _names(subs), []
    for p, name in names.items():
        done = out / f"{name}.json"
        if done.exists() and not force:
            try:
                rows[name] = json.loads(done.read_text())
                continue
            except ValueError:
                pass  # a damaged result is graded again
        todo.append(p)
    return names, rows, todo


def write_json_dict(data: dict, path: Path) -> None:
    atomic_write(path, json.dumps(data, indent=2) + "\n")


def write_csv(rows: dict, path: Path) -> None:
    """One row per submission, one column per problem, the total; rewritten whole, atomically."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["submission", *ORDER, "total", "max_total", "error"])
    for name in sorted(rows):
        r = rows[name]
        scores = {p["id"]: p["score"] for p in r.get("problems", [])}
        w.writerow([cell(name), *[f"{scores[p]:g}" if p in scores else "" for p in ORDER],
                    f"{r['score']:g}" if "score" in r else "", f"{r['max_score']:g}" if "max_score" in r else "",
                    cell(one_line(r.get("error", ""), 500))])
    atomic_write(path, buf.getvalue())


def cell(text: str) -> str:
    """Text for a CSV cell a spreadsheet opens: one that would start a formula (= + - @, or a tab or carriage return
    before one) is prefixed with an apostrophe, so that a submission's name or an error quoting it stays text."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
