"""Bad input to the kit's commands: one clear line and a non-zero exit, never a traceback or a silent default."""
from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("flag,value,words", [
    ("--timeout", "-1", "must be a number above 0"),
    ("--timeout", "0", "must be a number above 0"),
    ("--timeout", "nan", "must be a number above 0"),
    ("--timeout", "soon", "is not a number"),
    ("--cpu-limit", "-5", "must be a number above 0"),
    ("--memory-limit", "0", "must be a number above 0"),
    ("--output-limit", "1.5", "is not a number"),
])
def test_limits_must_be_positive_numbers(flag, value, words):
    proc = subprocess.run([sys.executable, "-m", "attnkit.fronts.cli", "grade", "--impl", "solutions", flag, value],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and flag in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_pytest_rejects_a_negative_problem_timeout():
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--attnkit-impl", "solutions", "--attnkit-timeout", "-1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4 and "must be a number above 0" in proc.stderr and "Traceback" not in proc.stderr



def test_a_submission_for_the_cluster_is_sent_within_the_unpacking_limits(tmp_path):
    """grade-batch --cluster sends each submission zipped: never more files or bytes than a worker would unpack, and
    no file a link points to (the submitter's link could name any file of the machine that sends)."""
    import zipfile

    from attnkit.errors import BadInput
    from attnkit.integrations.cluster import pack
    from attnkit.run.submission import MAX_MEMBERS

    many = tmp_path / "many"
    many.mkdir()
    for i in range(MAX_MEMBERS + 1):
        (many / f"f{i}.py").write_text("")
    with pytest.raises(BadInput, match=f"more than {MAX_MEMBERS} files"):
        pack(many)
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "masked_softmax.py").write_text("x = 1\n")
    (tmp_path / "secret").write_text("not theirs\n")
    (linked / "notes.txt").symlink_to(tmp_path / "secret")
    (tmp_path / "linked.zip").write_bytes(pack(linked))
    assert zipfile.ZipFile(tmp_path / "linked.zip").namelist() == ["masked_softmax.py"]
