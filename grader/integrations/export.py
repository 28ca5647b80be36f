"""attnkit export DIR: a candidate bundle with stubs, a README and visible checks; nothing hidden."""
from __future__ import annotations

import inspect
from pathlib import Path

from ..judge import public_checks
from ..errors import BadInput
from ..problems import get
from .public import cases
from ..model.stubs import render

PACKAGE = "submission"

TEST_HEADER = '''"""Public checks for your submission: shapes and weight sums on one fixed example per problem.

Run them with `pytest test_public.py` (only torch, numpy and pytest are needed). Passing them says
your code runs and has the right shapes; the interviewer's hidden grading checks much more
(masking, gradients, numerical parity, stability, dropout, ...).
"""
import importlib

import pytest
'''

TEST_BODY = '''

CASES = {cases!r}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_shapes_and_weight_sums(case):
    target = getattr(importlib.import_module(f"{package}.{{case['module']}}"), case["symbol"])
    problems = fixed_example_problems(target, case["ctor"], case["inputs"], case["outputs"], case["mask"],
                                      case["trailing"], case["numpy"], case["weights_at"])
    assert not problems, "; ".join(problems)
'''


CONFTEST = '''"""Logs each run of the public checks in submission/attempts.jsonl, which goes back with submission.zip: the
time (UTC) and which checks passed. Your interviewer sees it as a timeline of your attempts."""
import json
import time
from pathlib import Path

LOG = Path(__file__).resolve().parent / "submission" / "attempts.jsonl"
_OUTCOMES = {}


def pytest_runtest_logreport(report):
    if "[" in report.nodeid and (report.when == "call" or report.outcome != "passed"):
        _OUTCOMES[report.nodeid.rsplit("[", 1)[1].rstrip("]")] = report.passed and report.when == "call"


def pytest_sessionfinish(session):
    if not _OUTCOMES or not LOG.parent.is_dir():
        return
    entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "passed": sorted(c for c, ok in _OUTCOMES.items() if ok),
             "failed": sorted(c for c, ok in _OUTCOMES.items() if not ok)}
    try:
        with open(LOG, "a") as log:
            log.write(json.dumps(entry) + "\\n")
    except OSError:
        pass
'''


def _readme(problems) -> str:
    rows = "\n".join(f"| `{PACKAGE}/{p.id}.py` | `{p.symbol}` | {p.summary} |" for p in problems)
    return f"""# Attention mechanisms: coding exercise

Implement the stubs in `{PACKAGE}/`. Each file's docstrings give the math, the exact
signature, the parameter names and every shape; keep them as they are.

| file | implement | what it does |
|---|---|---|
{rows}

## Rules

- Python and PyTorch only; no other libraries. Modules reuse each other with relative imports
  (`from .masked_softmax import masked_softmax`).
- Keep the names and signatures; create exactly the parameters the docstrings list.
- Work on whatever device and dtype the inputs are on; never modify an input in place.
- Do not call `torch.nn.functional.scaled_dot_product_attention` or `torch.nn.MultiheadAttention`.

## Check your work

```bash
pip install torch numpy pytest
pytest test_public.py
```

The public checks only cover shapes and weight sums on one example. Your submission is
graded with hidden checks on masking, gradients, numerical agreement, stability and more.
Each run of the public checks adds a line to `{PACKAGE}/attempts.jsonl` (the time, and which
checks passed); it goes back with your submission and your interviewer sees it.

## Submit

Zip the `{PACKAGE}` folder (`zip -r submission.zip {PACKAGE}`) and send it back.
"""


def export(directory, problem_ids: list[str], variant: str | None = None) -> list[Path]:
    """The bundle for one candidate. `variant`: the name whose seed grades this candidate (`attnkit grade --variant`);
    it is the interviewer's to keep: nothing in the bundle names it (with the public kit, the name gives the seed)."""
    problems = [get(pid) for pid in problem_ids]
    missing = sorted({r for p in problems for r in p.requires} - set(problem_ids))
    if missing:
        raise BadInput(f"--problems: {', '.join(p.id for p in problems if set(p.requires) & set(missing))} "
                       f"needs {', '.join(missing)}: add it")
    root = Path(directory)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise BadInput(f"{directory} exists and is not empty: choose a new directory (nothing is overwritten)")
    files = {f"{PACKAGE}/__init__.py": "", "README.md": _readme(problems), "conftest.py": CONFTEST}
    files.update({f"{PACKAGE}/{p.id}.py": render(p) for p in problems})
    checks = inspect.getsource(public_checks).split('"""', 2)[2].lstrip("\n")  # drop the module docstring
    test = TEST_HEADER + checks.replace("import torch\n", "import torch\n", 1) + TEST_BODY.format(
        cases=[c for p in problems for c in cases(p)], package=PACKAGE)
    files["test_public.py"] = test
    written = []
    try:
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(path)
    except OSError as exc:
        raise BadInput(f"cannot write the bundle in {directory}: {exc.strerror}") from None
    return written
