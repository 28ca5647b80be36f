"""PNG heatmaps for failing checks: the learner's weights, the reference's, and their difference."""
from __future__ import annotations

from pathlib import Path

import torch

from ..judge.compare import argmax_index


def _slice(evidence: dict):
    """The (Tq, Tk) matrix of the batch (and head) holding the largest difference."""
    got, exp, mask = evidence["got"].to(torch.float64), evidence["expected"].to(torch.float64), evidence["mask"]
    diff = torch.nan_to_num((got - exp).abs(), nan=float("inf"))
    idx = argmax_index(diff.flatten(-2).amax(-1))  # over (B,) or (B, H)
    label = ", ".join(f"{n}={i}" for n, i in zip(("b", "head"), idx))
    return got[idx], exp[idx], mask[idx], label


def write_plots(report, directory: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    written = []
    for problem in report.problems:
        for check in problem.checks:
            if check.status != "failed" or not check.evidence:
                continue
            got, exp, mask, label = _slice(check.evidence)
            fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), constrained_layout=True)
            panels = [("your weights", got, "viridis"), ("reference", exp, "viridis"), ("yours - reference", got - exp, "coolwarm")]
            for ax, (title, data, cmap) in zip(axes, panels):
                shown = torch.nan_to_num(data, nan=0.0).numpy()
                limit = max(1e-12, abs(shown).max()) if cmap == "coolwarm" else None
                im = ax.imshow(shown, cmap=cmap, vmin=-limit if limit else 0, vmax=limit if limit else max(1.0, shown.max()),
                               aspect="auto", interpolation="nearest")
                for i, j in (~mask).nonzero().tolist():  # hatch each masked cell
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", edgecolor="black" if cmap == "coolwarm" else "white", lw=0))
                ax.set_xticks(range(shown.shape[1]))
                ax.set_yticks(range(shown.shape[0]))
                ax.set_title(title)
                ax.set_xlabel("key j (hatched: masked)")
                ax.set_ylabel("query i")
                fig.colorbar(im, ax=ax, shrink=0.8)
            fig.suptitle(f"{problem.id} / {check.id} ({label}){' - ' + check.mistake if check.mistake else ''}")
            path = Path(directory) / f"{problem.id}__{check.id}.png"
            fig.savefig(path, dpi=90)
            plt.close(fig)
            written.append(path)
    return written
