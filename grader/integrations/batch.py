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
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from ..files import atomic_write
from ..run.inbox import clean
from ..errors import BadInput
from ..problems import ORDER
from ..report.summary import to_json
from ..run.submission import open_submission


def _name(path: Path) -> str:
    """A unique, stable result name for a submission: its file name (a zip keeps `.zip`, so `alice/` and
    `alice.zip` stay apart), and, where characters had to be replaced or the name shortened, a hash of the
    original (so `a b/` and `a_b/` stay apart too)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", path.name)[:80]
    if safe == path.name:
        return safe
    return f"{safe}-{hashlib.sha256(path.name.encode('utf-8', 'surrogateescape')).hexdigest()[:10]}"


def submissions(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise BadInput(f"{folder}: not a directory of submissions")
    found = [p for p in sorted(folder.iterdir()) if not p.name.startswith(".") and (p.is_dir() or p.suffix.lower() == ".zip")]
    others = [p for p in sorted(folder.iterdir()) if not p.name.startswith(".") and p not in found]
    for p in others:
        print(f"skipped {p.name}: not a directory or a .zip", file=sys.stderr)
    if not found:
        raise BadInput(f"{folder}: no submissions in it (directories or .zip files)")
    return found


def run(folder, out, workers: int = 2, force: bool = False, **grading) -> dict[str, dict]:
    """Grade every submission in `folder` (`grading`: grade()'s options; `attnkit grade-batch` sets sandbox=True)."""
    from ..grading import grade

    folder, out = Path(folder), Path(out)
    subs = submissions(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--out {out}: cannot create it ({exc.strerror})") from None
    write_json_dict({"submissions": str(folder.resolve())}, out / "source.json")  # `attnkit similarity OUT` reads it
    lock, rows = threading.Lock(), {}
    names = {p: _name(p) for p in subs}
    todo = []
    for p, name in names.items():
        done = out / f"{name}.json"
        if done.exists() and not force:
            try:
                rows[name] = json.loads(done.read_text())
                continue
            except ValueError:
                pass  # a damaged result is graded again
        todo.append(p)

    def one(p: Path):
        name = names[p]
        try:
            impl, unpacked = open_submission(p, label=p.name)
            try:
                result = to_json(grade(impl, **grading))
            finally:
                if unpacked:
                    unpacked.cleanup()
            result["submission"] = p.name
            write_json_dict(result, out / f"{name}.json")
        except BadInput as exc:
            result = {"submission": p.name, "error": str(exc)}
            write_json_dict(result, out / f"{name}.json")
        except Exception as exc:  # noqa: BLE001 - one submission never stops the batch: an error row, with why
            result = {"submission": p.name, "error": f"could not be graded ({type(exc).__name__}: {clean(str(exc), 300)})"}
            write_json_dict(result, out / f"{name}.json")
        with lock:
            rows[name] = result
            write_csv(rows, out / "grades.csv")
        return name, result

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for future in as_completed([pool.submit(one, p) for p in todo]):
            name, result = future.result()
            line = result.get("error") or f"{result['score']:g}/{result['max_score']:g}"
            print(f"{name}: {line}", flush=True)
    write_csv(rows, out / "grades.csv")
    return rows


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
        w.writerow([name, *[f"{scores[p]:g}" if p in scores else "" for p in ORDER],
                    f"{r['score']:g}" if "score" in r else "", f"{r['max_score']:g}" if "max_score" in r else "",
                    r.get("error", "")])
    atomic_write(path, buf.getvalue())
