"""What a Dask cluster sends back for a submission, checked like any untrusted message before it is written: a result of
the report's shape (grader/report.schema.json, no other key, bounded size, consistent scores, graded in bubblewrap, the
seed and problems asked for), or an error row; anything else becomes the row MALFORMED."""
from __future__ import annotations

import functools
import json
import math
from pathlib import Path

from ..run.inbox import clean

MAX_RESULT_BYTES = 4 << 20  # a result's JSON (all thirteen problems' checks, each message capped: well under 1 MB)
MAX_STRING = 20000  # characters of one string in a result (learner text is capped at 4000 on the worker)
MAX_ERROR = 2000  # characters of an error row's text kept
MALFORMED = "the cluster returned a malformed result"


@functools.lru_cache(maxsize=1)
def _validator():
    """report.schema.json made strict: no key beyond those it names, at any level."""
    from jsonschema import Draft202012Validator

    schema = json.loads((Path(__file__).resolve().parent.parent / "report.schema.json").read_text())

    def strict(node):
        if isinstance(node, dict):
            if "properties" in node:
                node["additionalProperties"] = False
            for value in node.values():
                strict(value)
        elif isinstance(node, list):
            for value in node:
                strict(value)

    strict(schema)
    return Draft202012Validator(schema)


def _strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def _scores_fit(node: dict) -> bool:
    return math.isfinite(node["score"]) and math.isfinite(node["max_score"]) and \
        -1e-9 <= node["score"] <= node["max_score"] + 1e-9


def checked(result, grading: dict) -> dict:
    """A result from the cluster, as it is written: plain JSON of the shape a local grade has (its own copy,
    made from JSON text, so nothing of the received object is kept), or an error row. Anything else (not a
    dict, other keys or types, too large, scores that do not add up, not graded in bubblewrap, another seed or
    other problems than asked) is the error row MALFORMED."""
    def malformed(why: str) -> dict:
        return {"error": f"{MALFORMED} ({why})"}

    if type(result) is not dict:
        return malformed(f"not a report but a {type(result).__name__}")
    try:
        text = json.dumps(result, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return malformed(f"not plain JSON: {clean(str(exc), 100)}")
    if len(text) > MAX_RESULT_BYTES:
        return malformed(f"{len(text)} bytes, more than {MAX_RESULT_BYTES >> 20} MB")
    data = json.loads(text)
    if "error" in data:
        if set(data) != {"error"} or not isinstance(data["error"], str):
            return malformed("an error row holds only its text")
        return {"error": clean(data["error"], MAX_ERROR)}
    problems = _validator().iter_errors(data)  # the schema first: it bounds the depth that _strings walks
    first = next(problems, None)
    if first is not None:
        where = "/".join(str(p) for p in first.absolute_path) or "the report"
        return malformed(f"{where}: {clean(first.message, 150)}")
    if any(len(s) > MAX_STRING for s in _strings(data)):
        return malformed(f"a string longer than {MAX_STRING} characters")
    if data.get("sandbox") != "bubblewrap":
        return malformed("not graded inside bubblewrap")
    if "seed" in grading and data.get("seed") != grading["seed"]:
        return malformed("graded with another seed")
    ids = [p["id"] for p in data["problems"]]
    from ..problems import ORDER

    wanted = list(grading.get("problem_ids") or ORDER)
    if len(set(ids)) != len(ids) or set(ids) != set(wanted):
        return malformed("other problems than asked")
    if not (_scores_fit(data) and all(_scores_fit(p) and all(_scores_fit(c) for c in p["checks"])
                                      for p in data["problems"])):
        return malformed("scores out of range")
    for total in ("score", "max_score"):
        if not math.isclose(data[total], sum(p[total] for p in data["problems"]), rel_tol=1e-9, abs_tol=1e-6):
            return malformed(f"the {total} is not the problems' sum")
    return data
