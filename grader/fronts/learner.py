"""The learner's commands: list, hint, solution, reset. Each resolves problem names the same way."""
from __future__ import annotations

import shutil
import sys
from datetime import datetime
from pathlib import Path

from . import state
from ..problems import resolve


def cmd_list(args) -> int:
    from ..grading import grade
    from ..problems import all_problems
    from ..report.summary import progress
    from ..report.term import fancy
    from .tracks import track_table

    report = grade(args.impl)
    colour = fancy()
    print(f"attnkit: {report.impl} (seed {report.seed}); solve the track in order\n")
    print(track_table(report, all_problems(args.lang), colour=colour))
    print(progress(report, colour=colour))
    return 0


def cmd_hint(args) -> int:
    """The hints up to the next level (each call reveals one more); `--level N`: hint N alone, nothing reprinted."""
    from ..model.i18n import word
    from ..problems import get

    problem = get(resolve(args.problem), args.lang)
    total = len(problem.hints)
    data = state.load()
    reached = data["hints"].get(problem.id, 0)
    wanted = args.level  # checked against the number of hints with the rest of the request (requests.py)
    level = wanted if wanted is not None else min(reached + 1, total)
    data["hints"][problem.id] = max(reached, level)
    state.save(data)
    shown = [level] if wanted is not None else range(1, level + 1)
    for i in shown:
        print(word("hint", args.lang, i=i, n=total, pid=problem.id, text=problem.hints[i - 1]))
    if max(reached, level) < total:
        print(word("next_hint", args.lang, pid=problem.id))
    elif level == total:  # the last hint shown (an earlier one again, all of them seen: no footer)
        print(word("last_hint", args.lang, pid=problem.id))
    return 0


def cmd_solution(args) -> int:
    from .. import solution_path
    from ..grading import grade

    pid = resolve(args.problem)
    result = grade(args.impl, [pid]).problems[0]
    if result.status != "passed" and not args.force:
        print(f"{pid} is {result.status.replace('_', ' ')} ({result.score:g}/{result.max_score:g} points): the "
              f"reference is shown once your implementation passes. `attnkit hint {pid}` helps; "
              f"`attnkit solution {pid} --force` shows it anyway, and that is recorded.", file=sys.stderr)
        return 1
    if result.status != "passed":
        data = state.load()
        data["forced_solutions"][pid] = state.now()
        state.save(data)
        print(f"(shown with --force before passing: recorded in {state.state_path()})", file=sys.stderr)
    print(solution_path(pid).read_text(), end="")
    return 0


def cmd_reset(args) -> int:
    from ..problems import get
    from ..model.stubs import is_untouched_stub, render

    problem = get(resolve(args.problem), args.lang)
    path = Path(args.impl) / f"{problem.id}.py"
    stub = render(problem)
    if path.exists():
        text = path.read_text()
        if text == stub:
            print(f"{path} is already a fresh stub: nothing to do")
            return 0
        backup = _backup_name(problem.id)
        backup.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(path), str(backup))  # a move, even for a stub: nothing of the learner's is ever deleted
        print(f"moved your {path.name} to {backup}" + (" (it was an unchanged stub)" if is_untouched_stub(text) else ""))
    path.write_text(stub)
    print(f"wrote a fresh stub to {path}")
    return 0


def _backup_name(pid: str) -> Path:
    """A new, unused file name under the state folder's backups/: nothing is ever overwritten."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    base = state.backup_dir() / f"{pid}-{stamp}"
    candidate, n = base.with_suffix(".py"), 1
    while candidate.exists():
        candidate, n = Path(f"{base}-{n}.py"), n + 1
    return candidate
