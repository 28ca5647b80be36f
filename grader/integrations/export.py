"""attnkit export DIR and attnkit interview start: a candidate bundle with stubs, a README and visible checks (nothing
hidden), a manifest naming its scope, and the interviewer's record of it (bundle.py), kept on this machine."""
from __future__ import annotations

import inspect
import json
from pathlib import Path

from ..judge import public_checks
from ..errors import BadInput
from ..problems import get
from .bundle import MANIFEST, keep, new
from .bundle_files import CONFTEST, PACKAGE, PYTEST_INI, STUB_HEADER, TEST_BODY, TEST_HEADER, readme
from .public import cases
from ..model.stubs import render


def export(directory, problem_ids: list[str], variant: str | None = None,
           minutes: int | None = None) -> tuple[list[Path], Path]:
    """The bundle for one candidate, and the path of the interviewer's record of it. `variant`: the name whose seed
    grades this candidate; it is the interviewer's to keep: only the record names it (with the public kit, the name
    gives the seed). `minutes`: the time limit of a timed interview, counted from now."""
    problems = [get(pid) for pid in problem_ids]
    missing = sorted({r for p in problems for r in p.requires} - set(problem_ids))
    if missing:
        raise BadInput(f"--problems: {', '.join(p.id for p in problems if set(p.requires) & set(missing))} "
                       f"needs {', '.join(missing)}: add it")
    root = Path(directory)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise BadInput(f"{directory} exists and is not empty: choose a new directory (nothing is overwritten)")
    scope, manifest = new(problem_ids, variant, minutes)
    files = {f"{PACKAGE}/__init__.py": "", f"{PACKAGE}/{MANIFEST}": json.dumps(manifest, indent=1) + "\n",
             "README.md": readme(problems, minutes), "conftest.py": CONFTEST, "pytest.ini": PYTEST_INI}
    files.update({f"{PACKAGE}/{p.id}.py": render(p, STUB_HEADER) for p in problems})
    checks = inspect.getsource(public_checks).split('"""', 2)[2].lstrip("\n")  # drop the module docstring
    files["test_public.py"] = TEST_HEADER + checks + TEST_BODY.format(
        cases=[c for p in problems for c in cases(p)], package=PACKAGE)
    record = keep(scope)  # first: a bundle is never handed out without its record
    written = []
    try:
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(path)
    except OSError as exc:
        raise BadInput(f"cannot write the bundle in {directory}: {exc.strerror}") from None
    return written, record
