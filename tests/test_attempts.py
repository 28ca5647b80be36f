"""The candidate's attempt log: the bundle's public checks append every run to submission/attempts.jsonl, which
travels with submission.zip; the interviewer's report shows it as a self-reported timeline, read as hostile data."""
from __future__ import annotations

import json
import os
import zipfile

from conftest import SOLUTIONS, needs_bwrap
from attnkit.report.attempts import MAX_BYTES, read, timeline as blocks
from attnkit.report.doc import markdown
from test_hiring_and_scale import attnkit, run_public

KNOWN = {"masked_softmax": "masked_softmax", "luong_attention-dot": "luong_attention",
         "luong_attention-general": "luong_attention"}


def timeline(log, known) -> str:
    """The timeline's section as the Markdown report renders it."""
    return markdown("report", blocks(log, known))


def test_every_run_of_the_public_checks_is_logged_in_the_submission(tmp_path):
    bundle = tmp_path / "bundle"
    assert attnkit("export", str(bundle), "--problems", "masked").returncode == 0
    log = bundle / "submission" / "attempts.jsonl"
    assert run_public(bundle).returncode == 1  # the stub fails
    (bundle / "submission" / "masked_softmax.py").write_text((SOLUTIONS / "masked_softmax.py").read_text())
    assert run_public(bundle).returncode == 0
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["passed"], r["failed"]) for r in runs] == [([], ["masked_softmax"]), (["masked_softmax"], [])]
    assert all(r["time"].endswith("Z") for r in runs)


@needs_bwrap  # a candidate's code: --report grades only inside bubblewrap
def test_the_interviewers_report_shows_the_timeline(tmp_path):
    bundle = tmp_path / "bundle"
    assert attnkit("export", str(bundle), "--problems", "masked").returncode == 0
    run_public(bundle)
    (bundle / "submission" / "masked_softmax.py").write_text((SOLUTIONS / "masked_softmax.py").read_text())
    run_public(bundle)
    times = [json.loads(line)["time"] for line in (bundle / "submission" / "attempts.jsonl").read_text().splitlines()]
    archive = tmp_path / "submission.zip"
    with zipfile.ZipFile(archive, "w") as z:  # what `zip -r submission.zip submission` sends back
        for f in (bundle / "submission").iterdir():
            z.write(f, f"submission/{f.name}")
    md = tmp_path / "r.md"
    r = attnkit("grade", "--impl", str(archive), "--problems", "masked", "--report", str(md))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    text = md.read_text()
    assert "## Attempt log (self-reported)" in text and "read it as their account, not as proof" in text
    assert f"Runs: 2, the first at {times[0]}, the last at {times[1]}" in text
    assert f"`masked_softmax`: its public checks first all passed at {times[1]}" in text
    assert "| 1 | " + times[0] + " | 0 of 1 |" in text and "| 2 | " + times[1] + " | 1 of 1 |" in text


def test_a_hostile_log_is_filtered_and_counted(tmp_path):
    lines = [
        {"time": "2026-11-24T10:00:00Z", "passed": ["masked_softmax", "x | <img src=x onerror=alert(1)>"], "failed": []},
        {"time": "yesterday", "passed": ["masked_softmax"], "failed": []},  # not the bundle's form
        {"time": "2026-11-24T10:05:00Z", "passed": "masked_softmax", "failed": []},
        ["not", "an", "entry"],
        {"time": "2026-11-24T10:09:00Z", "passed": ["luong_attention-dot"], "failed": ["luong_attention-general"]},
    ]
    (tmp_path / "attempts.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n{broken\n")
    log = read(tmp_path, KNOWN)
    assert log["ignored"] == 4 and [r[0] for r in log["runs"]] == ["2026-11-24T10:00:00Z", "2026-11-24T10:09:00Z"]
    text = timeline(log, KNOWN)
    assert "<img" not in text and "onerror" not in text and "yesterday" not in text
    assert "4 line(s) of the log were not in the form the bundle writes" in text
    assert "`masked_softmax`: its public checks first all passed at 2026-11-24T10:00:00Z" in text
    assert "`luong_attention`: its public checks never all passed" in text


def test_a_huge_or_linked_log_is_bounded(tmp_path):
    entry = json.dumps({"time": "2026-11-24T10:00:00Z", "passed": ["masked_softmax"], "failed": []}) + "\n"
    (tmp_path / "attempts.jsonl").write_text(entry * (MAX_BYTES // len(entry) + 100))
    log = read(tmp_path, KNOWN)
    assert log["ignored"] >= 1 and len(log["runs"]) <= MAX_BYTES // len(entry) + 1
    assert "| ... |" in timeline(log, KNOWN)  # a long log is shortened in the report
    (tmp_path / "attempts.jsonl").unlink()
    (tmp_path / "secret").write_text(entry)
    os.symlink(tmp_path / "secret", tmp_path / "attempts.jsonl")
    assert read(tmp_path, KNOWN) is None  # a link could point anywhere on the interviewer's machine
    assert "No attempt log came with the submission" in timeline(None, KNOWN)
