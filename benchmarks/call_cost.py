"""The CPU that grading's calls themselves take, per problem, and the least wall time a grading could then take.

Each problem's calls (the run's plan, the memory window's calls included) are run by the reference solutions in a
process forked for that problem, as its worker runs them (the hooks of its first batch set up, `harness.execute` with
the inputs' digests), with nothing else around them: no pipe, no pickling, no sandbox, no judging. What it prints:

    problem                      calls   CPU s  (the largest check's share)
    ...
    the calls' own CPU, all problems: C s
    least wall time on N cores: import torch (I s, alone) + C / N = W s, that is W / floor x the floor

The least wall time counts only the two things no grading can avoid: one torch import and the calls. The floor is
that of benchmarks/grade_speed.py (`import torch` plus `pytest --version`, measured here in the same run). Where the
least time already exceeds the 2x target, no change to the plumbing reaches it: only fewer or cheaper calls.

    python benchmarks/call_cost.py [--impl solutions] [--problems ID,...] [--cores N]
"""
from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _measure(problem, plan, impl: Path) -> dict:
    """{check id: CPU seconds} of one problem's calls, run in this (forked) process as a worker runs them."""
    from attnkit.judge.plan import calls
    from attnkit.run import harness, hooks
    from attnkit.run.loader import load_symbol

    batch = calls(plan.cpu[problem.id])
    first = {}
    for c in batch:
        for name, options in (c.get("hooks") or {}).items():
            first.setdefault(name, options)
    for hook, options in hooks.active({"hooks": first}):
        hook.setup(options)
    target = load_symbol(impl, problem.id, problem.symbol, "attnkit_submission")
    spent = collections.Counter()
    for call in batch:
        start = time.process_time()
        try:
            harness.execute(call, target, digests=True)
        except Exception:  # noqa: BLE001 - a failing call still costs what it cost
            pass
        spent[call["key"].split("/")[0]] += time.process_time() - start
    return dict(spent)


def _forked(problem, plan, impl: Path) -> dict:
    """_measure in a child process: each problem's hooks and heap settings its own, as in its worker."""
    import pickle

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            data = pickle.dumps(_measure(problem, plan, impl))
        except BaseException as exc:  # noqa: BLE001 - reported by the parent
            data = pickle.dumps({"error": repr(exc)})
        os.write(write, data)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)


def _seconds(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", default="solutions")
    ap.add_argument("--problems", help="comma-separated ids (default: every problem but the kernels stage's)")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    torch_alone = min(_seconds([sys.executable, "-c", "import torch"]) for _ in range(3))
    floor = torch_alone + min(_seconds([sys.executable, "-m", "pytest", "--version"]) for _ in range(3))
    import torch

    from attnkit.defaults import DEFAULT_SEED
    from attnkit.judge.plan import Plan
    from attnkit.problems import available

    torch.set_num_threads(1)  # as in a worker
    wanted = set(args.problems.split(",")) if args.problems else None
    problems = [p for p in available(None) if (p.id in wanted if wanted else p.track != "kernels")]
    plan = Plan.draw(problems, DEFAULT_SEED)
    impl = (ROOT / args.impl).resolve()
    total = 0.0
    print(f"{'problem':<30} {'calls':>5} {'CPU s':>7}  (the largest check's share)")
    for p in problems:
        spent = _forked(p, plan, impl)
        if "error" in spent:
            print(f"{p.id:<30} could not run: {spent['error']}")
            continue
        cpu = sum(spent.values())
        total += cpu
        top = max(spent, key=spent.get)
        print(f"{p.id:<30} {len(plan.cpu[p.id]):>5} {cpu:7.2f}  ({top} {spent[top] / cpu:.0%})")
    least = torch_alone + total / args.cores
    print(f"the calls' own CPU, all problems: {total:.2f} s")
    print(f"least wall time on {args.cores} cores: import torch ({torch_alone:.2f} s, alone) + {total:.2f} / {args.cores} "
          f"= {least:.2f} s, that is {least / floor:.2f}x the floor of {floor:.2f} s (target <= 2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
