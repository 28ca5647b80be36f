"""Whether the expected values' helper process pays, by the number of cores: grading all problems with it and without
it, each pinned to 2, 3, 4 and 8 cores (taskset), interleaved; medians and the ratio (Linux only).

    python benchmarks/helper_cores.py [--repeat 5] [--impl solutions]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN = ("import sys; from attnkit.judge import expected as E; E.cores = lambda: {cores}; "
       "from attnkit.fronts.cli import main; sys.exit(main(['grade', '--impl', {impl!r}]))")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--impl", default="solutions")
    args = ap.parse_args(argv)
    impl = str((ROOT / args.impl).resolve())
    have = len(os.sched_getaffinity(0))
    counts = [n for n in (2, 3, 4, 8) if n <= have]
    times: dict[tuple[int, bool], list[float]] = {(n, h): [] for n in counts for h in (True, False)}
    env = {**os.environ, "ATTNKIT_SANDBOX": "off"}  # the helper exists only beside the forkserver
    for _ in range(args.repeat):
        for n, helper in times:
            code = RUN.format(cores=99 if helper else 1, impl=impl)
            start = time.perf_counter()
            subprocess.run(["taskset", "-c", f"0-{n - 1}", sys.executable, "-c", code], cwd=ROOT, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            times[(n, helper)].append(time.perf_counter() - start)
    for n in counts:
        with_, without = statistics.median(times[(n, True)]), statistics.median(times[(n, False)])
        print(f"{n} cores: with a helper {with_:5.2f} s, without {without:5.2f} s: the helper takes {with_ / without:4.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
