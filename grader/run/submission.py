"""A submission is a directory or a .zip of one; zips are unpacked safely into a temporary directory.

A zip is the submitter's data: every way it can be malformed (damaged, truncated, encrypted, an unknown compression,
lying sizes, unsafe, duplicate, clashing or overlong names) ends as one BadInput line in the grader's own words,
never an exception from zipfile; member and submission names are shown quoted, without control characters, bounded.
"""
from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from ..errors import BadInput
from .inbox import one_line
from .. import problems  # problems.ids() loads no spec (torch)

MAX_UNPACKED = 50 << 20  # bytes
MAX_ARCHIVE = MAX_UNPACKED + (4 << 20)  # bytes of the zip itself: more can only unpack to more than MAX_UNPACKED
MAX_MEMBERS = 1000
MAX_NAME = 255  # characters of a member's path; bytes of each of its parts (the file systems' own limit)


def _methods() -> dict[int, str]:
    """The compressions unpacked here: stored and deflate always, bzip2 and LZMA where Python has them."""
    found = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
    for method, module, name in ((zipfile.ZIP_BZIP2, "bz2", "bzip2"), (zipfile.ZIP_LZMA, "lzma", "LZMA")):
        try:
            __import__(module)
        except ImportError:
            continue
        found[method] = name
    return found


def shown(name: str, limit: int = 80) -> str:
    """A name from a submission (a member's, the submission's own), fit for one line of any report: quoted as
    Python's repr quotes it (control and invisible characters escaped), cleaned, bounded."""
    text = repr(name)
    return one_line(text if len(text) <= limit else text[:limit] + "...'", limit + 40)


def open_submission(path, label: str = "--impl") -> tuple[Path, tempfile.TemporaryDirectory | None]:
    """(the directory to grade, a temporary directory to clean up or None). An explicit --impl
    directory must hold the files itself; a zip, or an uploaded folder (batch, Gradescope), may
    hold them a folder or two down. `label`: "--impl" (messages then name the path), or how messages name the
    submission (the caller's own words, or a name already made safe with `shown`)."""
    p, where, is_zip = _checked(path, label)
    if is_zip:
        tmp = tempfile.TemporaryDirectory(prefix="attnkit-zip-")
        try:
            return _unzip(p, Path(tmp.name), where), tmp
        except BaseException:
            tmp.cleanup()
            raise
    if not label.startswith("--") and _is_dir(p, where):  # an upload: the files may sit a folder or two down
        return _find_root(p, p, where).resolve(), None
    return _impl_dir(p, where), None


def _is_dir(p: Path, where: str) -> bool:
    try:
        return p.is_dir()
    except OSError as exc:
        raise BadInput(f"{where}: cannot be read ({exc.strerror})") from None


def check_path(path, label: str = "--impl") -> None:
    """What open_submission says of `path` without unpacking it: of a .zip, what its directory shows (its data is
    read when it is unpacked)."""
    p, where, is_zip = _checked(path, label)
    if is_zip:
        with _opened(p, where):
            pass
    elif label.startswith("--"):
        _impl_dir(p, where)


def _checked(path, label: str) -> tuple[Path, str, bool]:
    """(the path, how messages name it, whether it is a .zip); BadInput where it is a file of another kind, or cannot
    be read."""
    p = Path(path).expanduser()
    where = f"{label} {one_line(str(path), 200)}" if label.startswith("--") else label
    try:
        is_file = p.is_file()
    except OSError as exc:
        raise BadInput(f"{where}: cannot be read ({exc.strerror})") from None
    if is_file and p.suffix.lower() != ".zip":
        raise BadInput(f"{where}: not a directory or a .zip")
    return p, where, is_file


def _unzip(archive: Path, dest: Path, label: str) -> Path:
    with _opened(archive, label) as (zf, members, paths):
        written = 0
        for m, parts in zip(members, paths):  # sizes are re-counted while writing: the header may lie
            target = dest.joinpath(*parts)
            if m.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            written += _extract(zf, m, target, MAX_UNPACKED - written, label)
    return _find_root(dest, archive, label)


@contextlib.contextmanager
def _opened(archive: Path, label: str):
    """(the zip, its members, each member's path as parts), once its directory is known to be safe to unpack: its
    size, its count of members, their names, kinds and methods (the data is checked while it is written)."""
    try:
        size = archive.stat().st_size
    except OSError as exc:
        raise BadInput(f"{label}: cannot be read ({exc.strerror})") from None
    if size > MAX_ARCHIVE:
        raise BadInput(f"{label}: more than {MAX_UNPACKED >> 20} MB when unpacked (the zip alone is {size >> 20} MB)")
    try:
        zf = zipfile.ZipFile(archive)
    except OSError as exc:
        raise BadInput(f"{label}: cannot be read ({exc.strerror})") from None
    except Exception:  # noqa: BLE001 - whatever zipfile raises on a damaged directory is the archive's fault
        raise BadInput(f"{label}: not a valid zip (not a zip at all, truncated, or its directory is damaged)") from None
    with zf:
        members = zf.infolist()
        if len(members) > MAX_MEMBERS:
            raise BadInput(f"{label}: more than {MAX_MEMBERS} files")
        if sum(m.file_size for m in members) > MAX_UNPACKED:
            raise BadInput(f"{label}: more than {MAX_UNPACKED >> 20} MB when unpacked")
        paths = [_check_member(m, label) for m in members]
        _check_names(members, paths, label)
        yield zf, members, paths


def _check_member(m: zipfile.ZipInfo, label: str) -> tuple[str, ...]:
    """The member's path as parts, once it is known to be safe and unpackable; else one line saying why."""
    name = m.filename
    if len(name) > MAX_NAME or any(len(part.encode("utf-8", "surrogateescape")) > MAX_NAME for part in name.split("/")):
        raise BadInput(f"{label}: the name {shown(name, 60)} is longer than {MAX_NAME} characters")
    if any(ord(c) < 32 or 0x7f <= ord(c) < 0xa0 for c in name):
        raise BadInput(f"{label}: the name {shown(name)} holds control characters")
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or "\\" in name or ":" in name:
        raise BadInput(f"{label}: {shown(name)} would land outside the submission")
    if not path.parts and not m.is_dir():
        raise BadInput(f"{label}: a file without a name")
    if stat.S_ISLNK(m.external_attr >> 16):
        raise BadInput(f"{label}: {shown(name)} is a link; links are not accepted")
    if m.flag_bits & 0x1:
        raise BadInput(f"{label}: {shown(name)} is encrypted; zip the files again without a password")
    methods = _methods()
    if m.compress_type not in methods:
        raise BadInput(f"{label}: {shown(name)} is compressed with a method this grader does not unpack "
                       f"(number {m.compress_type}); zip the files again with the usual one (deflate)")
    return path.parts


def _check_names(members: list, paths: list[tuple[str, ...]], label: str) -> None:
    """No two members land on the same path (also where only the case differs: some file systems ignore it), and
    no file has the path of a folder."""
    seen: dict[str, bool] = {}
    for m, parts in zip(members, paths):
        if not parts:
            continue
        key = "/".join(parts).casefold()
        if key in seen and seen[key] != m.is_dir():
            raise BadInput(f"{label}: {shown('/'.join(parts))} is both a file and a folder")
        if key in seen and not m.is_dir():  # a folder listed twice is harmless
            raise BadInput(f"{label}: {shown('/'.join(parts))} is in it twice")
        seen[key] = m.is_dir()
    folders = {"/".join(parts[:i]).casefold() for parts in paths for i in range(1, len(parts))}
    folders |= {"/".join(parts).casefold() for m, parts in zip(members, paths) if m.is_dir() and parts}
    for m, parts in zip(members, paths):
        if parts and not m.is_dir() and "/".join(parts).casefold() in folders:
            raise BadInput(f"{label}: {shown('/'.join(parts))} is both a file and a folder")


def _extract(zf: zipfile.ZipFile, m: zipfile.ZipInfo, target: Path, room: int, label: str) -> int:
    """Write one member; the bytes written. Any fault of the data (a bad checksum, a truncated or undecodable
    stream, a size that differs from the header's) is the archive's: one line."""
    name = shown(m.filename)
    count = 0
    try:
        out = open(target, "wb")
    except OSError as exc:
        raise BadInput(f"{label}: {name} cannot be unpacked here ({exc.strerror})") from None
    with out:
        try:
            src = zf.open(m)
        except Exception:  # noqa: BLE001 - a damaged local header, an unsupported feature: the archive's fault
            raise BadInput(f"{label}: {name} cannot be unpacked (its header is damaged or uses an unsupported "
                           "feature)") from None
        with src:
            while True:
                try:
                    chunk = src.read(1 << 20)
                except Exception:  # noqa: BLE001 - zipfile, zlib, bz2 and lzma each raise their own
                    raise BadInput(f"{label}: {name} is damaged (its data does not decompress to what its header "
                                   "says: a bad checksum, a truncated or corrupt stream)") from None
                if not chunk:
                    break
                count += len(chunk)
                if count > room:
                    raise BadInput(f"{label}: more than {MAX_UNPACKED >> 20} MB when unpacked")
                try:
                    out.write(chunk)
                except OSError as exc:
                    raise BadInput(f"{label}: {name} cannot be unpacked here ({exc.strerror})") from None
    if count != m.file_size:
        raise BadInput(f"{label}: {name} is damaged (its header says {m.file_size} bytes, its data holds {count})")
    return count


def _find_root(dest: Path, archive: Path, label: str) -> Path:
    """The folder of the zip or upload that holds the problem files: its root or one folder down (or two). Only real
    folders are entered, never a link: an upload's link (`work -> the kit's solutions`, `-> ../bob`) would have the
    grader, outside every sandbox, copy what it points at as the submission."""
    level = [dest]
    for _ in range(3):
        for d in level:
            if "__MACOSX" not in d.parts and any(_regular(d / f"{pid}.py") for pid in problems.ids()):
                return d
        level = [Path(e.path) for d in level for e in sorted(_entries(d), key=lambda e: e.name)
                 if e.is_dir(follow_symlinks=False)]
    raise BadInput(f"{label}: none of the problem files is in it ({', '.join(f'{p}.py' for p in problems.ids())})")


def _entries(d: Path) -> list:
    try:
        with os.scandir(d) as it:
            return list(it)
    except OSError:
        return []


def _regular(path: Path) -> bool:
    """A regular file itself, not a link to one."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def impl_dir(path) -> Path:
    return _impl_dir(Path(path).expanduser(), f"--impl {one_line(str(path), 200)}")


def _impl_dir(p: Path, where: str) -> Path:
    try:
        if not p.exists():
            raise BadInput(f"{where}: no such file or directory")
        if not p.is_dir():
            raise BadInput(f"{where}: not a directory")
        if not any((p / f"{pid}.py").is_file() for pid in problems.ids()):
            raise BadInput(f"{where}: none of the problem files is there "
                           f"({', '.join(f'{pid}.py' for pid in problems.ids())})")
    except OSError as exc:
        raise BadInput(f"{where}: cannot be read ({exc.strerror})") from None
    real = p.resolve()
    if str(real) != os.path.abspath(p) and _in_kit(real):  # reached through a link (abspath folds `..` alone)
        raise BadInput(f"{where}: a link leads from it into the kit's own files ({one_line(str(real), 200)}); grade the "
                       "submission's own folder")
    return real


def _in_kit(real: Path) -> bool:
    """Whether a resolved path is, or lies inside, one of the kit's folders the workers never see (the reference
    solutions, the grader, its tests, the stored expected values: sandbox.hidden_paths)."""
    from .sandbox import hidden_paths

    return any(real == Path(k).resolve() or Path(k).resolve() in real.parents for k in hidden_paths())
