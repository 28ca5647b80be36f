"""Throughput of `attnkit grade-batch --cluster` against local `attnkit grade-batch`, on the same submissions.

The same mix as benchmarks/batch_throughput.py (50% correct, 30% one catalogued mistake, 20%
hostile: hangs, crashes, floods, exits) is graded by a local batch (--workers N) and by a Dask
cluster started here (a scheduler and N single-threaded worker processes on this machine, so the
ratio shows what the distribution itself costs; with workers on other machines the cluster's
throughput grows with them). Both grade inside bubblewrap. Prints submissions per minute and the
ratio cluster / local. Measured on a 2-core VM (two workers, all thirteen problems): 30.8 per minute
locally, 28.0 on the cluster, 0.91x. The cluster is reached over tcp:// on loopback (`--insecure-local`),
or with --tls as docs/cluster.md deploys it: TLS with the certificates `attnkit cluster certs` makes.

    python benchmarks/batch_cluster.py [--count 100] [--workers 2] [--timeout 5] [--problems ID,...] [--tls]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from batch_throughput import MIX, make, rate  # noqa: E402 - the same submissions, the same report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=5)
    ap.add_argument("--problems", default=None, help="grade only these problems (default: all)")
    ap.add_argument("--tls", action="store_true", help="the cluster secured with TLS (docs/cluster.md), not tcp://")
    args = ap.parse_args(argv)
    from distributed import LocalCluster
    from attnkit.integrations.cluster import security
    from attnkit.integrations.cluster_certs import make as make_certs

    py = [sys.executable, "-m", "attnkit.fronts.cli", "grade-batch"]
    extra = ["--timeout", str(args.timeout)] + (["--problems", args.problems] if args.problems else [])
    with tempfile.TemporaryDirectory() as tmp:
        subs = Path(tmp) / "subs"
        make(subs, args.count)
        start = time.perf_counter()
        subprocess.run([*py, str(subs), "--out", f"{tmp}/local", "--workers", str(args.workers), *extra], cwd=ROOT,
                       check=True, capture_output=True)
        local = time.perf_counter() - start
        tempfile.tempdir = tmp  # the scheduler's files and the workers' (they inherit TMPDIR) stay in the run's folder
        os.environ["TMPDIR"] = tmp
        if args.tls:
            certs = make_certs(f"{tmp}/certs")
            secured = {"protocol": "tls://", "security": security(certs, roles=("scheduler", "worker", "client"))}
            connect = ["--cluster-certs", str(certs)]
        else:
            secured, connect = {}, ["--insecure-local"]
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=40, local_directory=f"{tmp}/dask", host="127.0.0.1", **secured) as cluster:
            start = time.perf_counter()
            subprocess.run([*py, str(subs), "--out", f"{tmp}/cluster", "--cluster", cluster.scheduler_address,
                            *connect, *extra], cwd=ROOT, check=True, capture_output=True)
            distributed = time.perf_counter() - start
        same = sorted(p.name for p in Path(f"{tmp}/local").glob("*.json")) == \
            sorted(p.name for p in Path(f"{tmp}/cluster").glob("*.json"))
    print(f"{args.count} submissions ({MIX}), problems: {args.problems or 'all'}, {args.workers} workers, "
          f"timeout {args.timeout:g} s, cluster over {'TLS' if args.tls else 'tcp:// (--insecure-local)'}")
    print(rate("local grade-batch:", local, args.count))
    print(rate("--cluster (local):", distributed, args.count))
    print(f"throughput ratio cluster / local {local / distributed:.2f}x; every submission has a result both ways: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
