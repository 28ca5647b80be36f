"""The text of a candidate bundle's own files (export.py writes them): the public checks' test file, its conftest (the
attempt log, one line per check, the clock), pytest.ini, the README and the stubs' header."""
from __future__ import annotations

PACKAGE = "submission"

STUB_HEADER = ('"""{title}: a stub for you to fill in.\n\nCheck it with `pytest test_public.py -k {id}` (shapes and '
               'weight sums on one example); your interviewer grades the rest.\n"""\n')

PYTEST_INI = """[pytest]
# one line per public check (conftest.py), no tracebacks, no cache folder
addopts = -q --tb=no -rN -p no:cacheprovider
"""

TEST_HEADER = '''"""Public checks for your submission: shapes and weight sums on one fixed example per problem.

Run them with `pytest test_public.py` (only torch, numpy and pytest are needed). Passing them says
your code runs and has the right shapes; the interviewer's hidden grading checks much more
(masking, gradients, numerical parity, stability, dropout, ...).
"""
import importlib
import traceback
from pathlib import Path

import pytest
'''

TEST_BODY = '''

CASES = {cases!r}


def _where(exc):
    """Where in the submission the exception was raised: ' (submission/x.py line N)', or ''."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).parent.name == "{package}"]
    return f" ({package}/{{Path(frames[-1].filename).name}} line {{frames[-1].lineno}})" if frames else ""


def outcome(case):
    """None if the case's checks hold, else one line: 'not started: ...' or what is wrong."""
    try:
        target = getattr(importlib.import_module(f"{package}.{{case['module']}}"), case["symbol"])
        found = fixed_example_problems(target, case["ctor"], case["inputs"], case["outputs"], case["mask"],
                                       case["trailing"], case["numpy"], case["weights_at"], case["row_sums"],
                                       case.get("keep"))
    except NotImplementedError as exc:
        return f"not started: it raises NotImplementedError({{str(exc)[:80]!r}})"
    except SyntaxError as exc:
        return f"{package}/{{case['module']}}.py does not compile: {{exc.msg}} (line {{exc.lineno}})"
    except Exception as exc:  # the candidate's code may raise anything: its message, never the checker's traceback
        return " ".join(f"{{type(exc).__name__}}: {{exc}}".split())[:300] + _where(exc)
    return "; ".join(found) or None


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_shapes_and_weight_sums(case):
    wrong = outcome(case)
    if wrong:
        pytest.fail(wrong, pytrace=False)
'''

CONFTEST = '''"""Prints one line per public check, and logs each run in submission/attempts.jsonl, which goes back with
submission.zip: the time (UTC) and which checks passed. Your interviewer sees it as a timeline of your attempts."""
import json
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOG = HERE / "submission" / "attempts.jsonl"
_OUTCOMES = {}
_LINES = {}


def pytest_runtest_logreport(report):
    if "[" in report.nodeid and (report.when == "call" or report.outcome != "passed"):
        case = report.nodeid.rsplit("[", 1)[1].rstrip("]")
        _OUTCOMES[case] = report.passed and report.when == "call"
        text = " ".join(str(report.longreprtext).split())[:400] if report.failed else ""
        _LINES[case] = "passed" if _OUTCOMES[case] else (text if text.startswith("not started") else
                                                          f"failed: {text or 'the check could not run'}")


def pytest_terminal_summary(terminalreporter):
    if not _LINES:
        return
    width = max(len(c) for c in _LINES)
    terminalreporter.write_line("")
    for case, line in _LINES.items():
        terminalreporter.write_line(f"{case:<{width}}  {line}")
    clock = _clock()
    if clock:
        terminalreporter.write_line(clock)


def _clock():
    """The time used, by this machine's clock (the interviewer's own record decides), for a timed bundle."""
    try:
        manifest = json.loads((HERE / "submission" / "bundle.json").read_text())
        started = datetime.strptime(manifest["started"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        minutes = int(manifest["minutes"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    used = (datetime.now(timezone.utc) - started).total_seconds() / 60
    left = "time is up" if used >= minutes else f"{minutes - used:.0f} min left"
    return f"time: {used:.0f} of {minutes} min used, {left} (by this machine's clock; your interviewer's decides)"


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


def readme(problems, minutes: int | None) -> str:
    rows = "\n".join(f"| `{PACKAGE}/{p.id}.py` | `{p.symbol}` | {p.summary} |" for p in problems)
    clock = (f"\n## Time\n\nYou have {minutes} minutes from when your interviewer started the clock (when this "
             f"bundle was made). Each run of the public checks prints the time used by your machine's clock; your "
             f"interviewer's record of the start decides. Work done after the time is up is shown to them as such.\n"
             if minutes else "")
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
{clock}
## Check your work

```bash
pip install torch numpy pytest
pytest test_public.py                   # every problem: one line per check
pytest test_public.py -k masked_softmax  # one problem
```

The public checks only cover shapes and weight sums on one example. Your submission is
graded with hidden checks on masking, gradients, numerical agreement, stability and more.
Each run of the public checks adds a line to `{PACKAGE}/attempts.jsonl` (the time, and which
checks passed); it goes back with your submission and your interviewer sees it, with your code.

## Submit

Zip the `{PACKAGE}` folder (`zip -r submission.zip {PACKAGE}`) and send it back. Leave
`{PACKAGE}/bundle.json` in it: it tells the grader which problems you were given.
"""
