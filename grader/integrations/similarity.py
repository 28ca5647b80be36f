"""attnkit similarity: pairs of submissions whose code is suspiciously alike, by copydetect's winnowing.

copydetect (the fingerprinting of MOSS: k-gram hashes of the token stream, winnowed) tokenizes with
Pygments and replaces names by one token, so renaming variables or reordering functions does not
hide a copy. The stub's text, the public checks' code and anything else the kit handed out are
fingerprinted as boilerplate and ignored: every submission starts from them. Only the problems'
files are compared, problem by problem; a pair's similarity is the share of its tokens (beyond the
boilerplate) that the other submission has too, over all the problems both attempted.
"""
from __future__ import annotations

import inspect
import io
import json
from pathlib import Path

from ..errors import BadInput
from ..judge import public_checks
from ..model.stubs import render
from ..problems import all_problems
from ..run.submission import open_submission, shown
from .listing import submissions

NOISE, GUARANTEE = 25, 30  # tokens: matches shorter than NOISE are ignored, any of GUARANTEE or more is found
MIN_TOKENS = 60  # a pair shares at least this many tokens to be listed: a handful of lines is no evidence
THRESHOLD = 0.6
MAX_CHARS = 200_000  # characters read of one problem file


def _fingerprint(code: str, boilerplate=None):
    from copydetect import CodeFingerprint

    return CodeFingerprint("submission.py", NOISE, GUARANTEE - NOISE + 1, boilerplate=boilerplate, language="python",
                           fp=io.StringIO(code))


def _boilerplate(problem) -> list:
    """The hashes of what every submission was given for `problem`: its stub and the public checks' code."""
    given = render(problem) + "\n" + inspect.getsource(public_checks)
    return list(_fingerprint(given).hashes)


def read(path: Path) -> dict[str, str]:
    """Each problem's code in one submission (directory or .zip), {problem id: text}: its file, then every helper
    module of the submission that importing it runs (code moved out of the problem's file is graded, so compared too;
    other problems' files are compared under their own problem); missing problems left out."""
    from ..judge.scan.files import helpers

    try:
        impl, unpacked = open_submission(path, label=shown(path.name))
    except BadInput:
        return {}
    try:
        files = {}
        for p in all_problems():
            f = impl / f"{p.id}.py"
            if f.is_file() and not f.is_symlink():
                parts = []
                for name in [f"{p.id}.py", *helpers(impl, p.id)]:
                    if (impl / name).is_file() and not (impl / name).is_symlink():
                        with open(impl / name, encoding="utf-8", errors="replace") as handle:
                            parts.append(handle.read(MAX_CHARS))
                files[p.id] = "\n\n".join(parts)[:MAX_CHARS * 4]
        return files
    finally:
        if unpacked:
            unpacked.cleanup()


def pairs(folder, threshold: float = THRESHOLD) -> list[dict]:
    """Pairs of submissions of `folder` (directories and .zip files, as grade-batch reads them) whose similarity is
    at least `threshold`, most alike first: {"a", "b", "similarity", "tokens", "problems": {id: similarity}}."""
    from copydetect import compare_files

    subs = {p.name: read(p) for p in submissions(Path(folder))}
    prints: dict = {}
    for problem in all_problems():
        have = {name: code for name, code in subs.items() if problem.id in code}
        if len(have) < 2:
            continue
        base = _boilerplate(problem)
        prints[problem.id] = {name: _fingerprint(code[problem.id], base) for name, code in have.items()}
    names, found = sorted(subs), []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            shared = total = 0
            per = {}
            for pid, fps in prints.items():
                if a not in fps or b not in fps:
                    continue
                overlap, (sim_a, sim_b), _ = compare_files(fps[a], fps[b])
                size = min(_tokens(fps[a]), _tokens(fps[b]))
                if size == 0:
                    continue
                per[pid] = round(max(float(sim_a), float(sim_b)), 3)
                shared, total = shared + int(overlap), total + size
            if total and shared >= MIN_TOKENS and shared / total >= threshold:
                found.append({"a": a, "b": b, "similarity": round(min(1.0, shared / total), 3), "tokens": shared,
                              "problems": per})
    return sorted(found, key=lambda f: (-f["similarity"], f["a"], f["b"]))


def _tokens(fp) -> int:
    """Tokens of a fingerprinted file beyond the boilerplate (what the comparison can find)."""
    return int(fp.token_coverage) if len(fp.hashes) else 0


def source_of(path: Path) -> Path:
    """The submissions folder: `path` itself, or the folder a grade-batch results directory was made from."""
    recorded = path / "source.json"
    if recorded.is_file():
        try:
            return Path(json.loads(recorded.read_text())["submissions"])
        except (ValueError, KeyError, TypeError, OSError):
            raise BadInput(f"{recorded}: not what grade-batch writes") from None
    return path
