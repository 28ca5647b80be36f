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
# Seconds per cell. A notebook's first graded cell imports torch and grades the problem
# (a few seconds on 2 cores); a hung submission is stopped earlier by attnkit's own
# per-problem timeout (30 s), so this only bounds cells the learner wrote themselves.
c.Execute.timeout = {CELL_TIMEOUT}
# Submissions from students not yet in the gradebook are graded, not refused.
c.Autograde.create_student = True
# attnkit's check cells get their points from a grading outside the student's kernel (grader/integrations/nbgrade.py):
# a student's cell can change anything in the kernel, so the kernel's own outputs of those cells are replaced.
import os  # noqa: E402

from nbgrader.converters.autograde import Autograde  # noqa: E402
from attnkit.integrations.nbgrade import GradeOutsideKernel  # noqa: E402

_steps = list(Autograde.class_traits()["autograde_preprocessors"].default())
c.Autograde.autograde_preprocessors = _steps[:1] + [GradeOutsideKernel] + _steps[1:]  # right after Execute
os.environ["ATTNKIT_OUTSIDE_KERNEL"] = "1"  # set only once the step is in: the kernel then skips its own grading
'''


def init(directory, lang: str | None = None) -> list[Path]:
    """Write the course (notebooks in `lang`, default: the chosen language); refuses a directory that
    exists and is not empty (nothing is overwritten)."""
    from ..model.i18n import current

    lang = lang or current()
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
