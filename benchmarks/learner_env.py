"""A learner's environment made from this one: a virtual environment that holds attnkit's own requirements only
(torch, NumPy, pytest and what they need, transitively, as the README's learner command installs them), hard-linked
from this environment's site-packages (no download, no copy). The development extras (Hypothesis, Jupyter's anyio)
register pytest plugins that every pytest run here loads; a learner's has none of them.

    python benchmarks/learner_env.py DIR    # prints DIR's python
"""
from __future__ import annotations

import importlib.metadata as metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

SITE = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
"""Where the installed distributions are looked up (never a checkout's stale egg-info on sys.path)."""


def requirements(name: str = "attnkit") -> dict[str, metadata.Distribution]:
    """`name`'s distribution and those it requires, transitively (no extras)."""
    seen: dict[str, metadata.Distribution] = {}
    todo = [name]
    while todo:
        key = re.split(r"[\s<>=!~;\[(]", todo.pop(), maxsplit=1)[0].lower().replace("_", "-")
        if not key or key in seen:
            continue
        dist = next(iter(metadata.distributions(name=key, path=SITE)), None)
        if dist is None:
            continue
        seen[key] = dist
        todo += [r for r in dist.requires or [] if "extra ==" not in r]
    return seen


def make(root: Path) -> Path:
    """The environment at `root`; its python. Files are hard links (bubblewrap binds the interpreter's folders: a
    symbolic link to a folder outside them would not resolve inside)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    for dist in requirements().values():
        base = Path(dist.locate_file(""))
        for top in sorted({Path(str(f)).parts[0] for f in dist.files or []} - {"..", "__pycache__"}):
            src, dst = base / top, site / top
            if not src.exists() or dst.exists():
                continue
            if src.is_dir():
                shutil.copytree(src, dst, copy_function=os.link, symlinks=True)
            else:
                os.link(src, dst)
    return python


if __name__ == "__main__":
    print(make(Path(sys.argv[1])))
