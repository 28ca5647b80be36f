"""attnkit course init DIR: a ready nbgrader course whose notebooks come from the specs."""
from __future__ import annotations

from pathlib import Path

from .notebooks import build, text
from ..errors import BadInput
from ..problems import ORDER

ASSIGNMENT = "attention"
CELL_TIMEOUT = 120

CONFIG = f'''# Made by `attnkit course init`: an nbgrader course for attnkit's attention problems.
# The usual commands work from this directory:
#   nbgrader generate_assignment {ASSIGNMENT}
#   nbgrader autograde {ASSIGNMENT}
#   nbgrader generate_feedback {ASSIGNMENT}
#   nbgrader export
c = get_config()  # noqa: F821

c.CourseDirectory.course_id = "attnkit"
# Seconds per cell. attnkit's cells stop a learner's endless loop at its own time per problem
# (30 s): the quick check in the kernel, and the grading outside it (each problem's graded cell,
# worth its checks' points with partial credit), so this only bounds cells the learner wrote.
c.Execute.timeout = {CELL_TIMEOUT}
# Submissions from students not yet in the gradebook are graded, not refused.
c.Autograde.create_student = True
# attnkit's check cells get their points from a grading outside the student's kernel, by code loaded before any
# student's cell runs (attnkit/integrations/nbgrade.py; docs/nbgrader.md in attnkit's repository): a student's
# cell can change anything in the kernel, so the kernel's own outputs of those cells are replaced. attnkit is
# imported here with bytecode caches off: its modules are compiled from their sources, never from a cache a
# student's cell could have planted.
import sys  # noqa: E402

_caches, sys.pycache_prefix = sys.pycache_prefix, "/dev/null/attnkit-no-bytecode"  # nothing is cached under a device
try:
    from attnkit.integrations.nbgrade import configure  # noqa: E402
finally:
    sys.pycache_prefix = _caches
configure(c)
# attnkit warns in the autograde output where its install is writable by the user the kernel runs as; once it is
# read-only (docs/nbgrader.md), make that an error:
# c.AttnkitStep.writable_install = "refuse"
'''


def init(directory, lang: str = "en") -> list[Path]:
    """Write the course (notebooks in `lang`); refuses a directory that exists and is not empty (nothing is
    overwritten)."""
    root = Path(directory)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise BadInput(f"{directory} exists and is not empty: choose a new directory (nothing is overwritten)")
    try:
        source = root / "source" / ASSIGNMENT
        source.mkdir(parents=True)
        written = [root / "nbgrader_config.py"]
        written[0].write_text(CONFIG)
        for pid in ORDER:
            path = source / f"{pid}.ipynb"
            path.write_text(text(build(pid, "source", solution="regions", lang=lang)))
            written.append(path)
    except OSError as exc:
        raise BadInput(f"cannot write the course in {directory}: {exc.strerror}") from None
    return written
