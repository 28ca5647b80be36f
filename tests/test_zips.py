"""Malformed zips given to `attnkit grade --impl`: each one is answered with exactly one line on stderr and exit code 2,
in the grader's own words, never a traceback; nothing of it is left unpacked. Every archive is built here, byte by
byte where zipfile would refuse to write it."""
from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

CODE = b"import torch\n\n\ndef masked_softmax(scores, mask=None, dim=-1):\n    return torch.softmax(scores, dim)\n" * 4
LOCAL, CENTRAL = b"PK\x03\x04", b"PK\x01\x02"


def plain(members, compression=zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        for name, data in members:
            z.writestr(name, data)
    return buf.getvalue()


def headers(data: bytes, name: bytes):
    """(offset of the local header, offset of the central header) of the member `name`."""
    found = []
    for sig, name_at, length_at in ((LOCAL, 30, 26), (CENTRAL, 46, 28)):
        at = 0
        while (at := data.find(sig, at)) >= 0:
            (n,) = struct.unpack_from("<H", data, at + length_at)
            if data[at + name_at:at + name_at + n] == name:
                found.append(at)
                break
            at += 4
    return found


def patched(members, name: bytes, local_field: int, central_field: int, fmt: str, value: int,
            compression=zipfile.ZIP_STORED) -> bytes:
    """A zip whose member `name` has `value` in one field of both its headers."""
    data = bytearray(plain(members, compression))
    local, central = headers(data, name)
    struct.pack_into(fmt, data, local + local_field, value)
    struct.pack_into(fmt, data, central + central_field, value)
    return bytes(data)


def bad_crc() -> bytes:
    data = bytearray(plain([("masked_softmax.py", CODE)]))
    data[data.find(CODE) + 20] ^= 0xFF  # one byte of the stored data changed: its CRC-32 no longer matches
    return bytes(data)


def method(number: int) -> bytes:
    return patched([("masked_softmax.py", CODE)], b"masked_softmax.py", 8, 10, "<H", number)


def size_lie(declared: int) -> bytes:
    """big.txt's header declares `declared` bytes; its deflated data holds 100,000."""
    members = [("masked_softmax.py", CODE), ("big.txt", b"a" * 100_000)]
    return patched(members, b"big.txt", 22, 24, "<I", declared, zipfile.ZIP_DEFLATED)


def hollowed() -> bytes:
    """Bytes cut from inside the first member's data, the central directory intact: every offset after it is wrong."""
    data = plain([("masked_softmax.py", CODE), ("helpers.py", CODE)])
    at = data.find(CODE)
    return data[:at + 10] + data[at + 110:]


def encrypted() -> bytes:
    return patched([("masked_softmax.py", CODE)], b"masked_softmax.py", 6, 8, "<H", 1)  # flag bit 0: encrypted


def duplicate() -> bytes:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate it is told to write
        return plain([("masked_softmax.py", CODE), ("masked_softmax.py", b"x = 1\n")])


CASES = {  # name: (the archive's bytes, words its one line says)
    "bad_crc": (bad_crc, "is damaged"),
    "method_99": (lambda: method(99), "method this grader does not unpack (number 99)"),
    "bzip2_garbage": (lambda: method(zipfile.ZIP_BZIP2), "is damaged"),
    "file_then_folder": (lambda: plain([("masked_softmax.py", CODE), ("helpers", b"x"), ("helpers/", b"")]),
                         "is both a file and a folder"),
    "folder_then_file": (lambda: plain([("masked_softmax.py", CODE), ("helpers/x.py", b"x"), ("helpers", b"y")]),
                         "is both a file and a folder"),
    "name_of_300": (lambda: plain([("masked_softmax.py", CODE), ("n" * 300 + ".py", b"x")]), "longer than 255"),
    "path_of_300": (lambda: plain([("masked_softmax.py", CODE), ("d/" * 150 + "x.py", b"x")]), "longer than 255"),
    "declared_small": (lambda: size_lie(10), "is damaged"),
    "declared_large": (lambda: size_lie(30 << 20), "its header says 31457280 bytes, its data holds 100000"),
    "declared_huge": (lambda: size_lie(0xFFFF_FFF0), "MB when unpacked"),
    "truncated": (lambda: plain([("masked_softmax.py", CODE), ("helpers.py", CODE)])[:300], "not a valid zip"),
    "truncated_end": (lambda: plain([("masked_softmax.py", CODE)])[:-7], "not a valid zip"),
    "hollowed": (hollowed, "cannot be unpacked"),
    "not_a_zip": (lambda: b"def masked_softmax(x):\n    return x\n", "not a valid zip"),
    "empty": (lambda: b"", "not a valid zip"),
    "encrypted": (encrypted, "is encrypted"),
    "absolute": (lambda: plain([("masked_softmax.py", CODE), ("/etc/cron.d/x", b"x")]), "would land outside"),
    "dot_dot": (lambda: plain([("masked_softmax.py", CODE), ("sub/../../x.py", b"x")]), "would land outside"),
    "duplicate": (duplicate, "is in it twice"),
    "case_clash": (lambda: plain([("masked_softmax.py", CODE), ("Masked_Softmax.py", b"x = 1\n")]), "is in it twice"),
    "control_name": (lambda: plain([("masked_softmax.py", CODE), ("a\n\x1b[2Jb.py", b"x")]), "control characters"),
}


def grade(archive: Path, tmp_path: Path, *pre: str) -> subprocess.CompletedProcess:
    """`attnkit grade --impl archive`, in a fresh interpreter (`pre`: statements run before the kit is imported)."""
    code = "; ".join([*pre, "import sys", "from attnkit.fronts.cli import main",
                      f"sys.exit(main(['grade', '--impl', {str(archive)!r}]))"])
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


def assert_one_line(proc: subprocess.CompletedProcess, words: str, tmp_path: Path) -> str:
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert len(lines) == 1 and proc.stderr.endswith("\n"), proc.stderr[-2000:]
    assert lines[0].startswith("attnkit: error: ") and words in lines[0], lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr and "\x1b" not in proc.stderr, proc.stderr
    assert not list((tmp_path / "tmp").glob("attnkit-zip-*")), "an unpacked folder was left behind"
    return lines[0]


@pytest.mark.parametrize("case", list(CASES))
def test_a_malformed_zip_is_one_line_and_exit_2(tmp_path, case):
    build, words = CASES[case]
    archive = tmp_path / "submission.zip"
    archive.write_bytes(build())
    assert_one_line(grade(archive, tmp_path), words, tmp_path)


def test_lzma_where_python_has_no_lzma(tmp_path):
    """An LZMA member, graded by a Python built without the lzma module: refused in one line, not a RuntimeError."""
    pytest.importorskip("lzma")  # to write the archive
    archive = tmp_path / "submission.zip"
    archive.write_bytes(plain([("masked_softmax.py", CODE)], zipfile.ZIP_LZMA))
    line = assert_one_line(grade(archive, tmp_path, "import sys", "sys.modules['lzma'] = None"),
                           "method this grader does not unpack (number 14)", tmp_path)
    assert "'masked_softmax.py'" in line
    from attnkit.run.submission import open_submission

    impl, unpacked = open_submission(archive)  # where Python has lzma, the same archive unpacks
    try:
        assert (impl / "masked_softmax.py").read_bytes() == CODE
    finally:
        unpacked.cleanup()


def test_the_zips_own_name_cannot_break_the_line(tmp_path):
    """The archive's file name (the submitter's choice) holds a newline and escape sequences: still one line, with
    no escape character, and the member's name is quoted."""
    archive = tmp_path / "sub\n\x1b[2J\x1b]0;pwned\x07mission.zip"
    archive.write_bytes(plain([("masked_softmax.py", CODE), ("../\x1b[31mred.py", b"x")]))
    line = assert_one_line(grade(archive, tmp_path), "control characters", tmp_path)
    assert "pwned" not in line


def test_a_well_formed_zip_still_opens(tmp_path):
    """The same checks let an ordinary archive through: a top folder, folder entries (one listed twice), deflate."""
    from attnkit.run.submission import open_submission

    import warnings

    archive = tmp_path / "ok.zip"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the folder written twice
        archive.write_bytes(plain([("sub/", b""), ("sub/", b""), ("sub/masked_softmax.py", CODE),
                                   ("sub/notes/a.txt", b"a")], zipfile.ZIP_DEFLATED))
    impl, unpacked = open_submission(archive)
    try:
        assert impl.name == "sub" and (impl / "masked_softmax.py").read_bytes() == CODE
    finally:
        unpacked.cleanup()


def test_a_batch_names_a_bad_zip_quoted_and_its_row_says_why(tmp_path):
    """One submission of a batch (integrations/one.py): the error row names the submission as the grader quotes it."""
    from attnkit.integrations.one import grade_one

    archive = tmp_path / "=cmd|calc \x1b[31m.zip"
    archive.write_bytes(method(99))
    row = grade_one(archive, {})
    assert set(row) == {"error"} and "number 99" in row["error"] and "\x1b" not in row["error"]
    assert row["error"].startswith("'=cmd|calc \\x1b[31m.zip': ")  # quoted: never a spreadsheet formula either


def test_an_uploaded_folder_is_never_followed_through_a_link(tmp_path):
    """An upload (a batch's folder, Gradescope's) whose only content is a link to the kit's solutions, or to another
    student's folder: the grader, which copies the submission outside every sandbox, never enters it."""
    from attnkit.errors import BadInput
    from attnkit.run.submission import open_submission
    from conftest import SOLUTIONS

    bob = tmp_path / "bob"
    bob.mkdir()
    (bob / "masked_softmax.py").write_text((SOLUTIONS / "masked_softmax.py").read_text())
    for name, target in (("alice", SOLUTIONS), ("carol", bob)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "work").symlink_to(target, target_is_directory=True)
        with pytest.raises(BadInput, match="none of the problem files"):
            open_submission(tmp_path / name, label=repr(name))
    (tmp_path / "dave" / "work").mkdir(parents=True)  # a real folder a level down is still found
    (tmp_path / "dave" / "work" / "masked_softmax.py").write_text("")
    assert open_submission(tmp_path / "dave", label="'dave'")[0] == (tmp_path / "dave" / "work").resolve()


def test_an_impl_folder_reached_through_a_link_into_the_kit_is_refused(tmp_path):
    """`--impl repo/submission`, where the candidate's repository makes `submission` a link to the kit's reference
    solutions: refused in one line (a link to a folder of one's own still works)."""
    from attnkit.errors import BadInput
    from attnkit.run.submission import impl_dir
    from conftest import SOLUTIONS

    (tmp_path / "submission").symlink_to(SOLUTIONS, target_is_directory=True)
    with pytest.raises(BadInput, match="a link leads from it into the kit's own files"):
        impl_dir(tmp_path / "submission")
    own = tmp_path / "own"
    own.mkdir()
    (own / "masked_softmax.py").write_text("")
    (tmp_path / "mine").symlink_to(own, target_is_directory=True)
    assert impl_dir(tmp_path / "mine") == own.resolve()
    assert impl_dir(SOLUTIONS) == SOLUTIONS.resolve()  # the kit's own solutions, named directly: the maintainers' check
    assert impl_dir(SOLUTIONS / ".." / SOLUTIONS.name) == SOLUTIONS.resolve()  # `..` is no link
