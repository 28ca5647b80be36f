"""One submission of a batch, graded: its JSON result, or an error row saying why (never an exception)."""
from __future__ import annotations

from pathlib import Path

from ..errors import BadInput
from ..report.summary import to_json
from ..run.inbox import clean
from ..run.submission import open_submission, shown


def grade_one(p: Path, grading: dict) -> dict:
    """One submission's result, or an error row with why: one submission never stops the batch."""
    from ..grading import grade

    try:
        impl, unpacked = open_submission(p, label=shown(p.name))  # the submitter's name, quoted
        try:
            return to_json(grade(impl, **grading))
        finally:
            if unpacked:
                unpacked.cleanup()
    except BadInput as exc:
        return {"error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - an error row, with why
        return {"error": f"could not be graded ({type(exc).__name__}: {clean(str(exc), 300)})"}
