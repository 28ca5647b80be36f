"""The learning track: named stages in order; each problem's spec says which stage it is in and what it builds on."""
from __future__ import annotations

from ..model.tracks import TRACKS


def prerequisites(problem) -> tuple[str, ...]:
    """What to solve first: the modules it imports, then what it builds on."""
    return tuple(dict.fromkeys(problem.requires + problem.after))


def grouped(problems) -> list[tuple[str, str, list]]:
    """(track, description, its problems in order) for every track that has one."""
    return [(name, about, [p for p in problems if p.track == name]) for name, about in TRACKS
            if any(p.track == name for p in problems)]


def track_table(report, problems, colour: bool = False) -> str:
    """`attnkit list`: the track in order, each problem with its status, points and prerequisites,
    then what to do next (the first unsolved problem whose prerequisites all pass)."""
    from ..problems import left_out, unavailable
    from ..report.summary import STATUS
    from ..report.term import paint

    status = {r.id: r for r in report.problems}
    width = max([len(p.id) for p in problems] + [28]) + 2  # the longest id, and two spaces before its status
    lines, ready = [], None
    for n, (name, about, members) in enumerate(grouped(problems), 1):
        lines.append(paint(f"{n}. {name}: {about}", "bold", colour))
        for p in members:
            if p.id not in status:  # not graded here: the one line that says what to install
                lines.append(f"   {p.id:<{width}}{unavailable(p) or left_out(p) or 'not graded'}")
                continue
            r = status[p.id]
            needs = [d for d in prerequisites(p) if d in status]
            blocked = [d for d in needs if status[d].status != "passed"]
            if r.status != "passed" and not blocked and ready is None:
                ready = p.id
            after = f"   after: {', '.join(needs)}" if needs else ""
            pts = f"{r.score:g}/{r.max_score:g}"
            lines.append(f"   {p.id:<{width}}{paint(f'{STATUS[r.status]:<12}', r.status, colour)}{pts:>7}{after}")
    lines.append(f"next: {ready}  (`attnkit hint {ready}` if stuck)" if ready else "next: every problem passes")
    return "\n".join(lines)
