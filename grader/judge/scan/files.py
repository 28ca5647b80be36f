"""A problem's modules read safely from the submission, parsed, and scanned: its own file and the siblings it
imports (transitively), with literal code given to exec/eval."""
from __future__ import annotations

import ast
import functools
import os
import stat
import warnings
from pathlib import Path

from .capabilities import WORDS, C, Finding
from .visitor import _Module

MAX_BYTES = 1 << 18
"""Larger files are not read (and say so): no solution comes near."""
MAX_FILES = 64
"""Modules read for one problem, its own and the siblings it imports (transitively)."""
MAX_DEPTH = 3
"""How deep literal code given to exec/eval is read."""


def _shown(rel: str) -> str:
    """A file name as the reports show it: printable ASCII, with anything else (control characters and escape
    sequences included) escaped as Python would write it."""
    return "".join(c if c.isascii() and c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in rel)


def read_source(path: Path, root: Path) -> tuple[bytes | None, str | None]:
    """(the file's bytes, None) or (None, why not): a regular file inside the submission, of at most MAX_BYTES; a
    FIFO, a device or a link out of the submission is never opened for reading."""
    try:
        real = path.resolve(strict=True)
        if not real.is_relative_to(root.resolve()):
            return None, "it is a link to a file outside the submission"
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
    except (OSError, RuntimeError, ValueError):
        return None, "it could not be opened"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "it is not a regular file"
        if st.st_size > MAX_BYTES:
            return None, f"it is larger than {MAX_BYTES // 1024} KB"
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_BYTES:
            return None, f"it is larger than {MAX_BYTES // 1024} KB"
        return b"".join(chunks), None
    except OSError:
        return None, "it could not be read"
    finally:
        os.close(fd)


def parse(source: bytes | str, name: str) -> tuple[ast.Module | None, str | None]:
    """The module's tree, or (None, why it does not parse)."""
    try:
        with warnings.catch_warnings():  # invalid escapes and the like: the learner's own warnings, not ours
            warnings.simplefilter("ignore")
            return ast.parse(source, filename=name), None
    except SyntaxError as exc:
        return None, f"it does not parse as Python (line {int(exc.lineno or 0)})"
    except (ValueError, MemoryError, RecursionError, OverflowError):
        return None, "it does not parse as Python"


def scan_tree(tree: ast.Module, file: str, package=(), banned=(), line: int | None = None, depth: int = 0):
    """(findings, sibling module paths) of one parsed module; literal code given to exec/eval is read too."""
    try:
        module = _Module(tree, file, list(package), banned, line).scan()
    except RecursionError:
        return [Finding(C.UNREADABLE, file, line or 0, f"{WORDS[C.UNREADABLE]} (it is nested too deeply)")], []
    findings, siblings = list(module.findings), list(module.siblings)
    for text, at in module.nested:
        inner, _ = parse(text, file)
        if inner is not None and depth < MAX_DEPTH:
            more, sib = scan_tree(inner, file, package, banned, at, depth + 1)
            findings += more
            siblings += sib
    return findings, siblings


def scan_source(source: bytes | str, file: str = "<source>", banned=()) -> list[Finding]:
    """The findings of one module's source (no siblings followed): for tests and tools."""
    tree, why = parse(source, file)
    if tree is None:
        return [Finding(C.UNREADABLE, file, _line(why), f"{WORDS[C.UNREADABLE]} ({why})")]
    return _unique(scan_tree(tree, file, (), banned)[0])


def _line(why: str) -> int:
    digits = why.rsplit("line ", 1)[-1].rstrip(")")
    return int(digits) if "line " in why and digits.isdigit() else 0


def _module_file(root: Path, parts: list[str]) -> list[tuple[Path, list[str]]]:
    """The files importing `parts` (under the submission) runs: each package's __init__.py, then the module;
    (path, its package's components)."""
    if not parts or not all(p.isidentifier() for p in parts):
        return []
    out = []
    for i in range(1, len(parts)):  # the submission's own __init__.py is never run (run/loader.py)
        init = root.joinpath(*parts[:i], "__init__.py")
        if init.is_file():
            out.append((init, parts[:i]))
    as_module, as_package = root.joinpath(*parts[:-1], parts[-1] + ".py"), root.joinpath(*parts, "__init__.py")
    if as_module.exists() or as_module.is_symlink():
        out.append((as_module, parts[:-1]))
    elif as_package.is_file():
        out.append((as_package, parts))
    return out


def _compiled(root: Path, parts: list[str]) -> Path | None:
    """The compiled module (.pyc, .so) importing `parts` would have run, had the sandbox copied it (run/sandbox.py)."""
    import importlib.machinery as m

    if not parts or not all(p.isidentifier() for p in parts):
        return None
    for suffix in m.BYTECODE_SUFFIXES + m.EXTENSION_SUFFIXES:
        path = root.joinpath(*parts[:-1], parts[-1] + suffix)
        if path.exists() or path.is_symlink():
            return path
    return None


def _unnamed(root: Path, parts: list[str]) -> Path | None:
    """The source file importing `parts` would have run, where a part is not an identifier (importlib's
    import_module("my-helper")): the sandbox leaves such files out (run/sandbox.unnamed_source)."""
    if not parts or all(p.isidentifier() for p in parts) or any(p in ("", ".", "..") or os.sep in p for p in parts):
        return None
    for path in (root.joinpath(*parts[:-1], parts[-1] + ".py"), root.joinpath(*parts, "__init__.py")):
        if path.is_file() and not path.is_symlink():
            return path
    return None


def scan_submission(impl, module: str, banned=()) -> Findings:
    """The findings of `<impl>/<module>.py` and of every module of the submission it imports, in order of file and
    line. A missing file gives none (the problem is not started); one the grader cannot read or parse gives one
    UNREADABLE finding."""
    root = Path(impl)
    first = root / f"{module}.py"
    if not (first.exists() or first.is_symlink()):
        return Findings()
    todo, seen, findings, imported, read = [(first, [])], set(), [], set(), []
    while todo:
        path, package = todo.pop(0)
        rel = _shown(os.path.relpath(path, root))
        if rel in seen:
            continue
        seen.add(rel)
        if len(seen) > MAX_FILES:
            findings.append(Finding(C.UNREADABLE, rel, 0, f"{WORDS[C.UNREADABLE]} (more than {MAX_FILES} modules)"))
            break
        data, why = read_source(path, root)
        if data is not None:
            read.append(os.path.relpath(path, root))
        found, siblings = _scanned(data, rel, tuple(package), tuple(banned)) if data is not None else (None, why)
        if found is None:
            findings.append(Finding(C.UNREADABLE, rel, _line(siblings), f"{WORDS[C.UNREADABLE]} ({siblings})"))
            continue
        findings += found
        for parts in siblings:
            imported.add(".".join(parts))
            files = _module_file(root, parts)
            todo += [t for t in files if _shown(os.path.relpath(t[0], root)) not in seen]
            if not files and (binary := _compiled(root, parts)) is not None:
                findings.append(Finding(C.UNREADABLE, _shown(os.path.relpath(binary, root)), 0,
                                        f"{WORDS[C.UNREADABLE]} (a compiled module without its source: left out of "
                                        "the submission, since only code whose source the grader reads runs)"))
            if not files and (unnamed := _unnamed(root, parts)) is not None:
                findings.append(Finding(C.UNREADABLE, _shown(os.path.relpath(unnamed, root)), 0,
                                        f"{WORDS[C.UNREADABLE]} (a module whose name is not a Python identifier, "
                                        "imported through importlib: left out of the submission, since only code "
                                        "the grader can follow runs; rename it)"))
    return Findings(_unique(findings), imported, read)


class Findings(list):
    """A problem's findings (a list, in order), `imported`: the dotted names of the submission's modules that its
    own module imports, transitively, whether or not they exist (`from .rope import apply_rope` names "rope"), and
    `files`: the submission's files that importing it runs, as read (relative paths, its own first)."""

    def __init__(self, findings=(), imported=(), files=()):
        super().__init__(findings)
        self.imported = frozenset(imported)
        self.files = tuple(files)


def helpers(impl, module: str) -> list[str]:
    """The submission's other files that importing `<impl>/<module>.py` runs (relative paths, as the grader reads
    them), other problems' files left out (each is read under its own problem): what a reader of the problem's code
    (an interviewer's report, the similarity check) must see besides its file, since code moved into a helper module
    is graded as well."""
    from ...problems import ORDER

    return [f for f in scan_submission(impl, module).files[1:] if not (f.endswith(".py") and f[:-3] in ORDER)]


def may_import(findings, module: str) -> bool:
    """Whether a problem's source imports the submission's module `module` (Findings.imported); True where the source
    could not be read (the scan's text, or no findings object): it may."""
    imported = getattr(findings, "imported", None)
    return imported is None or any(m == module or m.startswith(module + ".") for m in imported)


@functools.lru_cache(maxsize=64)
def _scanned(data: bytes, rel: str, package: tuple, banned: tuple):
    """(findings, sibling module paths) of one module's bytes, or (None, why it does not parse): once per run for a
    module that several problems import (the bytes are the key: a file changed since is read again)."""
    tree, why = parse(data, rel)
    if tree is None:
        return None, why
    found, siblings = scan_tree(tree, rel, list(package), banned)
    return tuple(found), tuple(tuple(s) for s in siblings)


def _unique(findings) -> list[Finding]:
    """One finding per capability, file and line (the first one's words), in order of file (as read) and line."""
    order = {f.file: i for i, f in reversed(list(enumerate(findings)))}
    out, seen = [], set()
    for f in sorted(findings, key=lambda f: (order[f.file], f.line)):
        if (f.capability, f.file, f.line) not in seen:
            seen.add((f.capability, f.file, f.line))
            out.append(f)
    return out
