"""The pieces that keep nbgrader's attnkit step on code no student's cell changed (grader/integrations/integrity.py),
each on a folder of its own: fast, no kernel, no nbgrader (tests/test_nbgrader.py runs the attacks for real)."""
from __future__ import annotations

import os
import pwd
import subprocess
import sys
import textwrap
import time

import pytest

from attnkit.integrations.integrity import Snapshot, writable


def test_a_file_put_back_as_it_was_still_counts_as_changed(tmp_path):
    """Same bytes, same mtime (os.utime), same inode: its ctime, which no unprivileged process can set, tells."""
    lib = tmp_path / "lib"
    lib.mkdir()
    module = lib / "mod.py"
    module.write_text("x = 1\n")
    where = [(str(lib), "tree")]
    time.sleep(0.05)  # past the file system's timestamp granularity
    before = Snapshot.take(where)
    st = module.stat()
    module.write_text("x = 2\n")
    module.write_text("x = 1\n")
    os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert module.stat().st_mtime_ns == st.st_mtime_ns and module.stat().st_ino == st.st_ino
    assert before.changes(Snapshot.take(where)) == [f"{module} (changed)"]


def test_new_and_removed_files_count_and_reading_does_not(tmp_path):
    lib = tmp_path / "lib"
    (lib / "pkg" / "__pycache__").mkdir(parents=True)
    (lib / "pkg" / "__init__.py").write_text("")
    (lib / "pkg" / "__pycache__" / "old.cpython-311.pyc").write_bytes(b"x")
    where = [(str(lib), "tree")]
    before = Snapshot.take(where)
    (lib / "pkg" / "__init__.py").read_text()
    assert before.changes(Snapshot.take(where)) == []
    (lib / "evil.pth").write_text("import os\n")
    (lib / "pkg" / "__pycache__" / "old.cpython-311.pyc").unlink()
    assert before.changes(Snapshot.take(where)) == [f"{lib / 'evil.pth'} (new)",
                                                   f"{lib / 'pkg' / '__pycache__' / 'old.cpython-311.pyc'} (removed)"]


def test_a_directory_at_the_head_of_sys_path_counts_by_its_importable_entries_only(tmp_path):
    """The course's own folder (`python -m nbgrader` puts it first on sys.path): nbgrader writes its gradebook and
    the autograded notebooks there, which change nothing Python imports; a module dropped there does."""
    (tmp_path / "autograded").mkdir()
    where = [(str(tmp_path), "top")]
    before = Snapshot.take(where)
    (tmp_path / "gradebook.db").write_bytes(b"x")
    (tmp_path / "autograded" / "alice.ipynb").write_text("{}")
    assert before.changes(Snapshot.take(where)) == []
    (tmp_path / "jinja2").mkdir()
    (tmp_path / "jinja2" / "__init__.py").write_text("")
    assert before.changes(Snapshot.take(where)) == [f"{tmp_path / 'jinja2' / '__init__.py'} (new)"]


GUARDED = """
import importlib.util, importlib._bootstrap_external as ext, pathlib, sys
from attnkit.integrations.import_guard import guard
from attnkit.integrations.integrity import Snapshot

lib = pathlib.Path(sys.argv[1])
sys.path.insert(0, str(lib))
guard(Snapshot.take([(str(lib), "tree")]))
cached = lib / "cached.py"  # a bytecode cache whose header matches its source: Python would normally load it
st = cached.stat()
pyc = pathlib.Path(importlib.util.cache_from_source(str(cached)))
pyc.parent.mkdir(exist_ok=True)
pyc.write_bytes(ext._code_to_timestamp_pyc(compile("X = 'planted'", str(cached), "exec"), st.st_mtime, st.st_size))
(lib / "changed.py").write_text("X = 'rewritten'\\n")
(lib / "new.py").write_text("X = 'new'\\n")
import good, cached
print(good.X, cached.X)
for name in ("changed", "new"):
    try:
        __import__(name)
        print(name, "imported")
    except ImportError as exc:
        print(name, "refused:", exc)
"""


def test_the_guard_runs_recorded_sources_only(tmp_path):
    """Once guarded, a process compiles each module from its source, verified against the snapshot: a planted
    bytecode cache is never run, a changed or new module is refused."""
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("good", "cached", "changed"):
        (lib / f"{name}.py").write_text(f"X = {name!r}\n")
    time.sleep(0.05)
    out = subprocess.run([sys.executable, "-c", GUARDED, str(lib)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "good cached"
    assert lines[1].startswith("changed refused:") and "changed since nbgrader started" in lines[1]
    assert lines[2].startswith("new refused:") and "created after nbgrader started" in lines[2]
    assert not list((lib / "__pycache__").glob("good.*")), "a guarded process writes no bytecode cache"


@pytest.mark.skipif(not hasattr(os, "getgrouplist"), reason="POSIX users")
def test_writable_for_another_user_reads_the_modes(tmp_path):
    """The check made for the kernel's user where it is not nbgrader's (c.AttnkitStep.kernel_user)."""
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    if os.geteuid() in (nobody.pw_uid,):
        pytest.skip("running as nobody")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    module = pkg / "mod.py"
    module.write_text("")
    os.chmod(module, 0o444)
    os.chmod(pkg, 0o555)
    try:
        assert writable([str(pkg), str(module)], "nobody") == []
        os.chmod(pkg, 0o777)
        os.chmod(module, 0o666)
        assert writable([str(pkg), str(module)], "nobody") == [str(pkg), str(module)]
    finally:
        os.chmod(pkg, 0o755)
        os.chmod(module, 0o644)


def test_the_course_configuration_imports_the_step_without_bytecode(tmp_path):
    """`attnkit course init` writes the import between a pycache_prefix under a device file and its restoring."""
    from attnkit.integrations.course import CONFIG
    from attnkit.integrations.integrity import NO_BYTECODE

    config = CONFIG.replace("c = get_config()  # noqa: F821", "from traitlets.config import Config\nc = Config()")
    check = textwrap.dedent("""
        import attnkit.integrations.nbgrade as step
        assert step.FROM_SOURCE, "imported with bytecode caches on"
        assert sys.pycache_prefix == before
        assert step.TakeSubmission in c.Autograde.sanitize_preprocessors
        assert c.Autograde.autograde_preprocessors[1] is step.GradeOutsideKernel
        print("ok")
    """)
    script = "import sys\nbefore = sys.pycache_prefix\n" + config + check
    assert NO_BYTECODE in CONFIG
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
