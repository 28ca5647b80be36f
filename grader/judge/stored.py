"""Expected values kept on disk between grading runs, where no submission can reach them.

A problem's expected values depend only on the kit, the seed and the environment (judge/expected.py), so a learner
who grades again, a restarted watch or pytest, or a batch on one machine computes them once: `Store.load` fills a
run's `References` before its workers start, `Store.save` writes what the run computed. The store is used only where
the workers cannot write it: inside bubblewrap, which binds none of the user's files, or as root, where every worker
takes an unprivileged uid (docs/security.md); in a 0700 folder of the grader's own uid, each file 0600 and checked so
before it is read. Elsewhere (a learner's laptop without bubblewrap) the values are computed each run, as before.

Where: defaults.cache_root() (ATTNKIT_CACHE, a folder or `off`), one folder per kit fingerprint (fingerprint.py),
the others removed when a new one is made; the process sandbox hides it from its workers as it hides the kit.
Each problem's values are one file (tensorfile.py), with the digests of what its calls send (grading._inputs_changed).
"""
from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path

from ..defaults import cache_root
from .fingerprint import fingerprint
from .tensorfile import Unstorable, read, write


def workers_cannot_write(jailed: bool) -> bool:
    """The run's workers cannot reach the store: in bubblewrap, or as root (they drop to a uid of their own)."""
    return jailed or getattr(os, "geteuid", lambda: -1)() == 0


class Store:
    """One run's view of the store: `folder` holds this kit fingerprint's files."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.loaded: set[tuple[str, int]] = set()
        self.sent_loaded: dict[tuple[str, int], int] = {}  # how many calls' input digests each loaded file had

    @classmethod
    def here(cls, jailed: bool) -> Store | None:
        """The store for a run (None: switched off, or the run's workers could write it)."""
        base = cache_root()
        if base is None or not workers_cannot_write(jailed):
            return None
        return cls(base / "expected" / fingerprint())

    def load(self, references, problems, seed: int) -> None:
        """Put into `references` the CPU part of each problem's values found on disk (a missing, foreign or
        unreadable file is skipped: the run computes that problem's values itself)."""
        if not _private(self.folder.parent.parent) or not _private(self.folder):
            return
        for p in problems:
            if references.has(p.id, seed):
                continue
            stored = read(self.folder / _name(p.id, seed))
            if isinstance(stored, dict) and isinstance(stored.get("values"), dict):
                references.put(p.id, seed, stored["values"])
                references.sent[(p.id, seed)] = _digests(stored.get("sent"))  # of what each call sends (grading.py)
                self.loaded.add((p.id, seed))
                self.sent_loaded[(p.id, seed)] = len(references.sent[(p.id, seed)])

    def forget(self, references, plan) -> None:
        """Drop a loaded part that lacks a case of the plan (a plan drawn otherwise than the stored one was: never
        expected, since the fingerprint covers the code that draws it); the run computes it again."""
        for pid, seed in list(self.loaded):
            cases = plan.cpu.get(pid, {})
            values = references.part_if_any(pid, seed)
            if values is None or any(c.reference and k not in values for k, c in cases.items()):
                references.drop(pid, seed)
                references.sent.pop((pid, seed), None)  # keyed by case as the values are: computed again with them
                self.loaded.discard((pid, seed))

    def save(self, references, problems, seed: int) -> None:
        """Write the CPU part of each problem's values that this run computed (best effort: a full disk, a
        read-only home or a value the store cannot keep leaves the run as it is)."""
        todo = [p for p in problems if references.part_if_any(p.id, seed) and ((p.id, seed) not in self.loaded or len(
            references.sent.get((p.id, seed), {})) > self.sent_loaded.get((p.id, seed), 0))]  # (digests added)
        if not todo or not _make_private(self.folder):
            return
        for p in todo:
            try:
                write(self.folder / _name(p.id, seed), {"values": references.part_if_any(p.id, seed),
                                                        "sent": references.sent.get((p.id, seed), {})})
            except (OSError, Unstorable):
                continue


def _digests(stored) -> dict:
    """{case key: [(argument position, digest or None)]} as stored; {} where it is not that (computed again)."""
    try:
        return {k: [(int(i), d if d is None else str(d)) for i, d in v] for k, v in stored.items()}
    except (AttributeError, TypeError, ValueError):
        return {}


def _name(pid: str, seed: int) -> str:
    return f"{pid}-{seed}.bin"


def _private(folder: Path) -> bool:
    """A real folder (no link) of this uid that no one else may write or read."""
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077


def _make_private(folder: Path) -> bool:
    """Create the store's folders (0700) where missing; a new fingerprint's folder replaces the others. False
    where the folders exist but are not private (someone else's, or open to others): the store is then unused."""
    base = folder.parent.parent
    try:
        fresh = not folder.is_dir()
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        for d in (base / "expected", folder):
            d.mkdir(mode=0o700, exist_ok=True)
        if not all(_private(d) for d in (base, base / "expected", folder)):
            return False
        if fresh:
            for other in (base / "expected").iterdir():
                if other.name != folder.name and other.is_dir() and not other.is_symlink():
                    shutil.rmtree(other, ignore_errors=True)
        for left in folder.glob(".writing-*"):  # a write cut short (the process killed) an hour ago or more
            if time.time() - left.lstat().st_mtime > 3600:
                left.unlink(missing_ok=True)
    except OSError:
        return False
    return True
