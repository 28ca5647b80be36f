"""What attnkit's hidden checks add to `nbgrader autograde`, per notebook.

Two courses are made in the same run with `attnkit course init` and one full submission each:
the real one, and a baseline whose graded, quick-check and heatmap cells are all trivial
(`pass`), with the same cell count and the same implementation cells (so the kernel start
and the torch import are in both). Both are autograded `--repeat` times; the report gives
the medians, their ratio, and the extra seconds per notebook. Target (issue 4): < 1 s.

    python benchmarks/nbgrader_overhead.py [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def run(cwd: Path, *args: str) -> None:
    subprocess.run(list(args), cwd=cwd, env=ENV, check=True, capture_output=True)


def make_course(root: Path, trivial: bool) -> int:
    run(ROOT, sys.executable, "-m", "attnkit.fronts.cli", "course", "init", str(root))
    notebooks = sorted((root / "source" / "attention").glob("*.ipynb"))
    if trivial:
        for path in notebooks:
            nb = nbformat.read(path, as_version=4)
            for cell in nb.cells:
                if cell.cell_type == "code" and "from attnkit.integrations.notebook import" in cell.source:
                    cell.source = "pass"  # graded cells stay graded cells, with their points
            nbformat.write(nb, path)
    run(root, sys.executable, "-m", "nbgrader", "generate_assignment", "attention")
    shutil.copytree(root / "source" / "attention", root / "submitted" / "student" / "attention")
    return len(notebooks)


def autograde(root: Path) -> float:
    start = time.perf_counter()
    run(root, sys.executable, "-m", "nbgrader", "autograde", "attention", "--force")
    return time.perf_counter() - start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        real, base = Path(tmp) / "real", Path(tmp) / "baseline"
        n = make_course(real, trivial=False)
        make_course(base, trivial=True)
        times = {"real": [], "baseline": []}
        for _ in range(args.repeat):
            times["real"].append(autograde(real))
            times["baseline"].append(autograde(base))
    r, b = statistics.median(times["real"]), statistics.median(times["baseline"])
    print(f"nbgrader autograde, {n} notebooks: attnkit checks {r:.1f} s, trivial cells {b:.1f} s (medians of {args.repeat})")
    print(f"ratio {r / b:.2f}x; added per notebook: {(r - b) / n:.2f} s (target < 1 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
