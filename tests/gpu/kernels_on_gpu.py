"""The kernels stage's Triton kernels run for real on an NVIDIA GPU: each problem's reference, the correct styles of
tests/unseen/ and every catalogued mistake, against float64 PyTorch on the same rounded inputs.

The grader runs these kernels through Triton's interpreter, on any machine; this script says what the same kernels do
on hardware: the error in each dtype (float32 goes through TF32 in `tl.dot`, Triton's default on a GPU), which
catalogued mistakes show in the values there (the others are caught by the interpreter's counts: traffic, bounds),
and each reference kernel's shared memory and registers as the GPU's own compilation reports them. It needs a GPU,
Triton and this checkout (the kit need not be installed):

    python tests/gpu/kernels_on_gpu.py [--out report.json] [--workers 12]

`--interpret` runs the same on the CPU through the interpreter (a dry run: float64 and float32 only, small shapes).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import tempfile
import time
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIDS = ("triton_flash_attention", "triton_flash_attention_backward")
TOL = {"float64": 1e-9, "float32": 1e-2, "float16": 1e-2, "bfloat16": 6e-2}
"""Largest error allowed, relative to the largest magnitude of the expected tensor (at least 1): float32 is TF32 in
tl.dot on a GPU (a 10-bit mantissa), float16 and bfloat16 are the inputs' own rounding and the products'."""
FULL = ((2, 2, 200, 200, 64, 64, 64), (1, 2, 130, 77, 64, 64, 32), (1, 2, 77, 130, 128, 32, 64),
        (2, 1, 97, 97, 32, 32, 16))
"""(B, H, Tq, Tk, d, BLOCK_M, BLOCK_N): partial last blocks on both axes, more queries than keys and fewer."""
SMALL = FULL[1:3]
DTYPES = ("float64", "float32", "float16", "bfloat16")


def _modules():
    sys.path.insert(0, str(ROOT))
    from grader.diagnose.mistakes import apply  # noqa: E402  (the kit's own patching of a mistake into source)
    from grader.problems import triton_flash_attention as fwd  # noqa: E402
    from grader.problems import triton_flash_attention_backward as bwd  # noqa: E402
    return apply, {"triton_flash_attention": fwd, "triton_flash_attention_backward": bwd}


def jobs(interpret: bool) -> list[dict]:
    """One job per source: each reference, each unseen correct style (all shapes and dtypes), each mistake (fewer)."""
    apply, specs = _modules()
    dtypes = ("float64", "float32") if interpret else DTYPES
    out = []
    for pid in PIDS:
        ref = (ROOT / "solutions" / f"{pid}.py").read_text()
        full = [FULL[1]] if interpret else FULL
        out.append({"pid": pid, "name": "reference", "source": ref, "shapes": full, "dtypes": dtypes})
        for path in sorted((ROOT / "tests" / "unseen").glob(f"{pid}__*.py")):
            out.append({"pid": pid, "name": "unseen:" + path.stem.split("__", 1)[1], "source": path.read_text(),
                        "shapes": full, "dtypes": dtypes})
        for m in specs[pid].PROBLEM.mistakes:
            out.append({"pid": pid, "name": "mistake:" + m.id, "source": apply(ref, m),
                        "shapes": [SMALL[0]] if interpret else SMALL, "dtypes": ("float32",) if interpret
                        else ("float32", "float16")})
    return out


def _load(source: str, folder: str, name: str):
    path = Path(folder) / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _expected(pid, q, k, v, do, causal):
    """float64 on the GPU, from the rounded inputs: the forward's (output, lse), or the backward's (dq, dk, dv) with
    the call's (o, lse) as given."""
    import torch

    _, specs = _modules()
    o, lse = specs["triton_flash_attention_backward"].forward(q, k, v, causal)  # the kit's float64 forward
    if pid == "triton_flash_attention":
        return [o, lse], None
    scale = q.shape[-1] ** -0.5
    s = q @ k.transpose(-2, -1) * scale
    p = torch.where(torch.isfinite(lse)[..., None], torch.exp(s - torch.where(torch.isfinite(lse), lse, 0.0)[..., None]),
                    0.0)
    if causal:
        p = p.tril(k.shape[-2] - q.shape[-2])
    dv = p.transpose(-2, -1) @ do
    dp = do @ v.transpose(-2, -1)
    ds = p * (dp - (do * o).sum(-1, keepdim=True))
    return [ds @ k * scale, ds.transpose(-2, -1) @ q * scale, dv], (o, lse)


def _error(got, want) -> float:
    import torch

    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        return float("inf")
    got = got.double()
    finite = torch.isfinite(want)
    if not torch.equal(torch.isfinite(got), finite) or not torch.equal(got[~finite], want[~finite]):
        return float("nan")
    return ((got - want)[finite].abs().max() / max(1.0, want[finite].abs().max().item())).item() if finite.any() \
        else 0.0


def run_job(job: dict, interpret: bool, folder: str) -> dict:
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    import torch

    device = "cpu" if interpret else "cuda"
    record = {"pid": job["pid"], "name": job["name"], "cases": [], "error": None, "onchip": None}
    try:
        module = _load(job["source"], folder, f"{job['pid']}_{abs(hash(job['name']))}")
        fn = getattr(module, job["pid"])
        gen = torch.Generator().manual_seed(0)
        for (B, H, Tq, Tk, d, bm, bn) in job["shapes"]:
            for causal in (False, True):
                q, k, v, do = (torch.randn(B, H, T, d, generator=gen, dtype=torch.float64) for T in (Tq, Tk, Tk, Tq))
                for dt in job["dtypes"]:
                    dtype = getattr(torch, dt)
                    rounded = [t.to(dtype).to(device) for t in (q, k, v, do)]
                    want, fwd = _expected(job["pid"], *(t.double() for t in rounded), causal)
                    args = rounded[:3] if fwd is None else [
                        *rounded[:3], fwd[0].to(dtype), fwd[1].to(torch.float64 if dt == "float64" else torch.float32),
                        rounded[3]]
                    case = {"shape": [B, H, Tq, Tk, d, bm, bn], "causal": causal, "dtype": dt}
                    try:
                        got = fn(*args, causal, bm, bn)
                        if device == "cuda":
                            torch.cuda.synchronize()
                        case["errors"] = [_error(g, w) for g, w in zip(got, want)]
                    except Exception as exc:  # noqa: BLE001 - what the kernel did on this machine, reported
                        case["raised"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                    record["cases"].append(case)
        try:  # the contract's ValueError for block sizes that are no power of two
            fn(*args[:len(args)], False, 24, 16)
            record["blocks_24"] = "no error"
        except Exception as exc:  # noqa: BLE001
            record["blocks_24"] = type(exc).__name__
        if not interpret and job["name"] == "reference":
            try:
                record["onchip"] = _onchip(job["pid"], module)
            except Exception as exc:  # noqa: BLE001 - Triton's internals differ between versions
                record["onchip"] = [f"not read: {type(exc).__name__}: {str(exc)[:200]}"]
    except Exception as exc:  # noqa: BLE001
        record["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return record


def _onchip(pid, module) -> list:
    """The reference's kernels as this GPU compiled them (float16, d = 64, blocks of 64): shared memory, registers,
    spills, from the compiled kernels Triton keeps per jit function."""
    import torch
    import triton

    B, H, T, d = 1, 2, 256, 64
    q, k, v, do = (torch.randn(B, H, T, d, device="cuda", dtype=torch.float16) for _ in range(4))
    args = [q, k, v] if pid == "triton_flash_attention" else [q, k, v, q.clone(), torch.zeros(B, H, T, device="cuda"),
                                                               do]
    getattr(module, pid)(*args, False, 64, 64)
    torch.cuda.synchronize()
    seen = []
    for name, obj in vars(module).items():
        if isinstance(obj, triton.runtime.jit.JITFunction):
            for cache in getattr(obj, "device_caches", {}).values():
                for kernel in (cache[0] if isinstance(cache, tuple) else cache).values():
                    kernel._init_handles()
                    seen.append({"kernel": name, "shared": kernel.metadata.shared, "registers": kernel.n_regs,
                                 "spills": kernel.n_spills, "num_warps": kernel.metadata.num_warps})
    return seen


def timing() -> dict:
    """The reference forward against F.scaled_dot_product_attention, float16, (4, 16, 2048, 2048, 64): a ratio in one
    run, for the record (the grader never times)."""
    import torch
    import triton.testing

    sys.path.insert(0, str(ROOT / "solutions"))
    import triton_flash_attention as ref

    q, k, v = (torch.randn(4, 16, 2048, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    out = {}
    for causal in (False, True):
        mine = triton.testing.do_bench(lambda: ref.triton_flash_attention(q, k, v, causal, 128, 64))
        torch_ms = triton.testing.do_bench(
            lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal))
        out[f"causal={causal}"] = {"reference_ms": mine, "sdpa_ms": torch_ms, "ratio": mine / torch_ms}
    return out


def _in_process(index: int, job: dict, interpret: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="attnkit-gpu-") as folder:  # removed here, even if the job's process died
        command = [sys.executable, __file__, "--job", str(index), "--folder", folder] + (
            ["--interpret"] if interpret else [])
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=JOB_SECONDS)
        except subprocess.TimeoutExpired:
            return {"pid": job["pid"], "name": job["name"], "cases": [], "error": f"over {JOB_SECONDS} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1][:200]
        return {"pid": job["pid"], "name": job["name"], "cases": [],
                "error": f"its process ended with {done.returncode}: {tail}"}
    return json.loads(lines[-1])


JOB_SECONDS = 400


def summary(records: list[dict]) -> list[str]:
    lines = []
    for r in records:
        if r["error"]:
            lines.append(f"{r['pid']:32} {r['name']:36} ERROR {r['error']}")
            continue
        worst: dict = {}
        raised = [c for c in r["cases"] if "raised" in c]
        for c in r["cases"]:
            for e in c.get("errors", []):
                worst[c["dtype"]] = max(worst.get(c["dtype"], 0.0), e) if not math.isnan(e) else float("nan") \
                    if not math.isnan(worst.get(c["dtype"], 0.0)) else worst[c["dtype"]]
        within = all((not math.isnan(w)) and w <= TOL[dt] for dt, w in worst.items()) and not raised
        text = ", ".join(f"{dt} {w:.1e}" for dt, w in worst.items())
        lines.append(f"{r['pid']:32} {r['name']:36} {'within' if within else 'DEPARTS'} [{text}]"
                     + (f" raised {len(raised)}x: {raised[0]['raised'][:100]}" if raised else "")
                     + f" blocks=24: {r.get('blocks_24')}")
        for o in r.get("onchip") or []:
            lines.append(f"    compiled here: {o}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="", help="write every record as JSON here")
    parser.add_argument("--workers", type=int, default=12)
    parser.add_argument("--interpret", action="store_true", help="a dry run on the CPU through the interpreter")
    parser.add_argument("--only", default="", help="run only the jobs whose name contains this")
    parser.add_argument("--job", type=int, default=-1, help=argparse.SUPPRESS)  # one job, in a process of its own
    parser.add_argument("--folder", default="", help=argparse.SUPPRESS)  # where that job writes its module
    opts = parser.parse_args(argv)
    everything = jobs(opts.interpret)
    if opts.job >= 0:  # a kernel that faults may leave its process's CUDA context unusable: one process per job
        print(json.dumps(run_job(everything[opts.job], opts.interpret, opts.folder), default=str))
        return 0
    todo = [i for i, j in enumerate(everything) if opts.only in j["name"]]
    start = time.time()
    with ThreadPoolExecutor(max_workers=opts.workers) as pool:
        records = list(pool.map(lambda i: _in_process(i, everything[i], opts.interpret), todo))
    report = {"records": records, "seconds": time.time() - start}
    if not opts.interpret:
        import torch
        import triton

        report.update(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                      timing=timing())
    print("\n".join(summary(records)))
    print(json.dumps({k: v for k, v in report.items() if k != "records"}, indent=1))
    if opts.out:
        Path(opts.out).write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
