"""A submission is a directory or a .zip of one; zips are unpacked safely into a temporary directory."""
from __future__ import annotations

import stat
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from ..errors import BadInput
from .. import problems  # problems.ORDER loads the specs (torch): only when a submission is opened

MAX_UNPACKED = 50 << 20  # bytes
MAX_MEMBERS = 1000


def open_submission(path, label: str = "--impl") -> tuple[Path, tempfile.TemporaryDirectory | None]:
    """(the directory to grade, a temporary directory to clean up or None). An explicit --impl
    directory must hold the files itself; a zip, or an uploaded folder (batch, Gradescope), may
    hold them a folder or two down."""
    p = Path(path).expanduser()
    if p.is_file() and p.suffix.lower() == ".zip":
        tmp = tempfile.TemporaryDirectory(prefix="attnkit-zip-")
        try:
            return _unzip(p, Path(tmp.name), f"{label} {path}" if label.startswith("--") else label), tmp
        except BadInput:
            tmp.cleanup()
            raise
    if p.is_file():
        raise BadInput(f"{label} {path}: not a directory or a .zip" if label.startswith("--") else
                       f"{label}: not a directory or a .zip")
    try:
        return impl_dir(p), None
    except BadInput as exc:
        if p.is_dir() and not label.startswith("--"):  # an upload: the files may sit a folder or two down
            try:
                return _find_root(p, p, label), None
            except BadInput:
                pass
        raise BadInput(str(exc).replace("--impl", label, 1) if label.startswith("--") else
                       f"{label}: {str(exc).split(': ', 1)[1]}") from None


def _unzip(archive: Path, dest: Path, label: str) -> Path:
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise BadInput(f"{label}: not a valid zip ({exc})") from None
    with zf:
        members = zf.infolist()
        if len(members) > MAX_MEMBERS:
            raise BadInput(f"{label}: more than {MAX_MEMBERS} files")
        if sum(m.file_size for m in members) > MAX_UNPACKED:
            raise BadInput(f"{label}: more than {MAX_UNPACKED >> 20} MB when unpacked")
        for m in members:
            name = PurePosixPath(m.filename)
            if name.is_absolute() or ".." in name.parts or "\\" in m.filename or ":" in m.filename:
                raise BadInput(f"{label}: {m.filename!r} would land outside the submission")
            if stat.S_ISLNK(m.external_attr >> 16):
                raise BadInput(f"{label}: {m.filename!r} is a link; links are not accepted")
        written = 0
        for m in members:  # sizes are re-counted while writing: the header may lie
            target = dest / m.filename
            if m.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(m) as src, open(target, "wb") as out:
                while chunk := src.read(1 << 20):
                    written += len(chunk)
                    if written > MAX_UNPACKED:
                        raise BadInput(f"{label}: more than {MAX_UNPACKED >> 20} MB when unpacked")
                    out.write(chunk)
    return _find_root(dest, archive, label)


def _find_root(dest: Path, archive: Path, label: str) -> Path:
    """The folder of the zip that holds the problem files: its root or one folder down (or two)."""
    for depth in range(3):
        for d in [dest] if depth == 0 else dest.glob("/".join(["*"] * depth)):
            if d.is_dir() and "__MACOSX" not in d.parts and any((d / f"{pid}.py").is_file() for pid in problems.ORDER):
                return d
    raise BadInput(f"{label}: none of the problem files is in it ({', '.join(f'{p}.py' for p in problems.ORDER)})")


def impl_dir(path) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise BadInput(f"--impl {path}: no such file or directory")
    if not p.is_dir():
        raise BadInput(f"--impl {path}: not a directory")
    if not any((p / f"{pid}.py").is_file() for pid in problems.ORDER):
        raise BadInput(f"--impl {path}: none of the problem files is there ({', '.join(f'{pid}.py' for pid in problems.ORDER)})")
    return p.resolve()
