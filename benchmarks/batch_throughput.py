"""Throughput of `attnkit grade-batch` against one fresh `attnkit grade` process per submission.

The same submissions (a mix of correct, buggy and hostile ones) are graded both ways in the
same run, with the same per-problem timeout and the same concurrency, and the report gives
submissions per minute and the ratio. Target (issue 5): at least 3x, with the same isolation
(both use the same sandboxed workers).

    python benchmarks/batch_throughput.py [--count 100] [--workers 2] [--timeout 5]
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HOSTILE = {
    "hang": ("additive_attention.py", "while True:\n    pass\n"),
    "crash": ("luong_attention.py", "import os\nos.abort()\n"),
    "flood": ("masked_softmax.py", "while True:\n    print('x' * 1000)\n"),
    "exit": ("multihead_additive_attention.py", "import sys\nsys.exit(1)\n"),
}


MIX = "50% correct, 30% one mistake, 20% hostile"


def rate(label: str, seconds: float, count: int) -> str:
    """One line of a throughput report: the time and submissions per minute."""
    return f"{label:<24}{seconds:6.1f} s  ({60 * count / seconds:6.1f} per minute)"


def make(folder: Path, count: int) -> None:
    from attnkit.diagnose.mistakes import wrong_source
    from attnkit.problems import all_problems

    mistakes = [(p, m) for p in all_problems() for m in p.mistakes]
    hostile = list(HOSTILE.values())
    for i in range(count):
        d = folder / f"s{i:03d}"
        shutil.copytree(ROOT / "solutions", d)
        kind = i % 10
        if 5 <= kind <= 7:  # 30%: one catalogued mistake
            p, m = mistakes[i % len(mistakes)]
            (d / f"{p.id}.py").write_text(wrong_source(p, m))
        elif kind >= 8:  # 20%: hostile
            name, code = hostile[i % len(hostile)]
            (d / name).write_text(code)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=5)
    args = ap.parse_args(argv)
    py = [sys.executable, "-m", "attnkit.fronts.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        subs = Path(tmp) / "subs"
        make(subs, args.count)
        start = time.perf_counter()
        subprocess.run([*py, "grade-batch", str(subs), "--out", f"{tmp}/batch", "--workers", str(args.workers),
                        "--timeout", str(args.timeout)], cwd=ROOT, check=True, capture_output=True)
        batch = time.perf_counter() - start

        def naive(d: Path):
            subprocess.run([*py, "grade", "--impl", str(d), "--timeout", str(args.timeout), "--json",
                            f"{tmp}/naive-{d.name}.json"], cwd=ROOT, capture_output=True)

        start = time.perf_counter()
        with ThreadPoolExecutor(args.workers) as pool:
            list(pool.map(naive, sorted(subs.iterdir())))
        baseline = time.perf_counter() - start
    print(f"{args.count} submissions ({MIX}), {args.workers} at a time, timeout {args.timeout:g} s")
    print(rate("grade-batch:", batch, args.count))
    print(rate("one attnkit grade each:", baseline, args.count))
    print(f"throughput ratio {baseline / batch:.2f}x (target >= 3x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
