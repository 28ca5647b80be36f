"""grade-batch on a Dask cluster (`--cluster tcp://SCHEDULER:8786`): one task per submission.

Dask's distributed scheduler does the distribution: it sends each task to a worker, and when a
worker dies it reschedules that worker's tasks on the others (up to its `allowed-failures`, 3 by
default; then the task fails with KilledWorker, and the submission gets an error row). A task
carries the submission itself (its bytes, zipped, at most MAX_BYTES), so workers need no shared
file system; each worker grades it exactly as `attnkit grade --untrusted` would, inside
bubblewrap, and returns the JSON result. Results are written here, as each one arrives, exactly as
a local batch writes them, so an interrupted batch resumes the same way. A submission is sent only within
the limits its worker will unpack anyway (run/submission.py: files and bytes).
"""
from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path

from ..errors import BadInput
from ..run.inbox import clean
from ..run.submission import MAX_MEMBERS, MAX_UNPACKED


def pack(path: Path) -> bytes:
    """A submission as zip bytes: a .zip as it is, a directory zipped (regular files only, no link followed); within
    the limits a worker unpacks (more files or bytes: refused here, not sent)."""
    if path.is_file():
        if path.stat().st_size > MAX_UNPACKED:
            raise BadInput(f"{path.name}: more than {MAX_UNPACKED >> 20} MB")
        return path.read_bytes()
    buf, total, count = io.BytesIO(), 0, 0
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(path.rglob("*")):
            if f.is_symlink() or not f.is_file():
                continue
            total, count = total + f.stat().st_size, count + 1
            if total > MAX_UNPACKED or count > MAX_MEMBERS:
                raise BadInput(f"{path.name}: more than {MAX_MEMBERS} files or {MAX_UNPACKED >> 20} MB")
            z.write(f, f.relative_to(path).as_posix())
    return buf.getvalue()


def grade_bytes(name: str, data: bytes, grading: dict) -> dict:
    """On a worker: the submission's result (one.grade_one on the unpacked bytes, inside bubblewrap)."""
    from .one import grade_one

    with tempfile.TemporaryDirectory(prefix="attnkit-task-") as tmp:
        archive = Path(tmp) / f"{Path(name).stem or 'submission'}.zip"
        archive.write_bytes(data)
        return grade_one(archive, grading)


def grade_all(address: str, todo: list[Path], record, grading: dict) -> None:
    """Each submission of `todo` graded on the cluster at `address`; record(path, result) as each one ends."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise BadInput('--cluster needs Dask\'s distributed: pip install -e ".[cluster]"') from None
    try:
        client = Client(address, timeout="20s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise BadInput(f"--cluster {address}: no Dask scheduler answers there ({type(exc).__name__})") from None
    try:
        futures = {}
        for p in todo:
            try:
                data = pack(p)
            except (BadInput, OSError) as exc:
                record(p, {"error": str(exc)})
                continue
            futures[client.submit(grade_bytes, p.name, data, dict(grading, sandbox=True), pure=False)] = p
        for future in as_completed(futures):
            p = futures[future]
            try:
                record(p, future.result())
            except Exception as exc:  # noqa: BLE001 - a lost task (KilledWorker after retries) is an error row
                record(p, {"error": f"could not be graded on the cluster ({type(exc).__name__}: {clean(str(exc), 200)})"})
    finally:
        client.close()
