"""attnkit class-report: what a class's grade-batch results say, as one self-contained HTML page (or JSON).

The numbers are class_stats.py's (not started counted apart from failed), the page class_page.py's (static, sortable
as an enhancement, escaped); the plots here are matplotlib PNGs embedded as data URIs, so the page opens offline.
"""
from __future__ import annotations

import base64
import io
import json
from pathlib import Path

from .class_page import page
from .class_stats import STATUSES, load, stats

__all__ = ["load", "page", "plots", "stats", "write"]
COLOURS = {"passed": "#70ad47", "failed": "#ed7d31", "did not load": "#c00000", "not started": "#d9d9d9"}


def _read_similar(path: Path) -> list | None:
    """The pairs of a similarity.json, or None where there is none (or it is not what `attnkit similarity` writes)."""
    try:
        pairs = json.loads(path.read_text())["pairs"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [p for p in pairs if isinstance(p, dict)] if isinstance(pairs, list) else None


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def plots(s: dict) -> dict[str, str]:
    """The figures as data URIs: the score histogram, and each problem's submissions by status (stacked)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    out = {}
    fig, ax = plt.subplots(figsize=(6, 3), constrained_layout=True)
    top = max(1.0, s["max_score"])
    ax.hist(s["scores"], bins=min(20, max(1, int(top))), range=(0, top), color="#4472c4", edgecolor="white")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(f"score (out of {s['max_score']:g})")
    ax.set_ylabel("submissions")
    out["scores"] = _png(fig)
    plt.close(fig)
    names = list(s["problems"])[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(names) + 1.4), constrained_layout=True)
    left = [0] * len(names)
    for status in STATUSES:
        counts = [s["problems"][n][status] for n in names]
        ax.barh(names, counts, left=left, color=COLOURS[status], label=status)
        left = [a + b for a, b in zip(left, counts)]
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("graded submissions")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(STATUSES), frameon=False)
    out["problems"] = _png(fig)
    plt.close(fig)
    return out


def write(results, out=None, json_out=None) -> dict:
    """Read `results`, write the page to `out` and the numbers to `json_out` (either may be None); the numbers."""
    from ..files import atomic_write

    results = Path(results)
    s = stats(load(results))
    s["similar"] = _read_similar(results / "similarity.json")
    if out is not None:
        atomic_write(Path(out), page(s, plots(s), str(results), Path(out).parent))
    if json_out is not None:
        atomic_write(Path(json_out), json.dumps(s, indent=2) + "\n")
    return s
