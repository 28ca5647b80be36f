"""Triton kernels compiled for CUDA targets without a GPU: their shared memory, registers and spills (the `onchip`
hook, run/hooks/triton.py), in a child process of the worker, inside its sandbox."""
from __future__ import annotations

import os

import torch

from .kernels import INTERPRET
TYPES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.float64: "fp64",
         torch.int8: "i8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64", torch.uint8: "u8",
         torch.bool: "i1"}
"""Triton's name of each tensor dtype a kernel's pointer may have."""


class LearnerCompileError(Exception):
    """Triton refused to compile the learner's kernel (its own message): the learner's failure, not the grader's."""


def _option(options: dict, name: str, default: int) -> int:
    """A launch option as Triton reads it: absent or None, its default; an int, for the compiler to accept or refuse;
    anything else the learner's error (a GPU launch would fail)."""
    value = options.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise LearnerCompileError(f"the launch passed {name} as {type(value).__name__[:40]}: Triton takes an int")
    return value


COMPILE_SECONDS = 120.0
"""The compiling process's time limit: the learner's file executed again and each kernel compiled for each arch (tens
of seconds for a backward pass's kernels on a slow, shared machine)."""


def compile_launches(launches: list, arches: tuple, timeout: float = COMPILE_SECONDS) -> dict:
    """Each distinct launch's kernel compiled for each CUDA arch (80: sm_80, 90: sm_90) without a GPU, as the launch
    specialised it: {arch: [(kernel name, shared bytes, registers per thread, spilled bytes, warps)]}.

    In a child process (COMPILE, run with `python -I -c`): a process that interpreted a kernel cannot compile one, since
    triton.language's own jit functions are made interpreted or compiled once, when it is first imported. The child
    executes the learner's file again with the interpreter off, so that its kernels are the compiler's own, and keeps
    Triton's cache in a temporary folder, removed after."""
    import json
    import subprocess
    import sys
    import tempfile

    jobs, seen = [], set()
    for launch in launches:
        fn = launch.kernel.fn
        args = {name: _describe(name, fn.__name__, value) for name, value in launch.args.items()}
        job = {"path": fn.__code__.co_filename, "kernel": fn.__name__, "args": args, "module": fn.__module__,
               "fingerprint": _fingerprint(fn.__globals__),
               "warps": _option(launch.options, "num_warps", 4), "stages": _option(launch.options, "num_stages", 3)}
        key = json.dumps(job, sort_keys=True)
        if key not in seen:
            seen.add(key)
            jobs.append(job)
    with tempfile.TemporaryDirectory(prefix="attnkit-triton-", dir=_roomy()) as tmp:
        out = os.path.join(tmp, "result.json")
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "PYTHONPATH")}
        env.update({INTERPRET: "0", "TRITON_CACHE_DIR": tmp, "TRITON_HOME": tmp, "HOME": tmp,
                    "TRITON_DEFAULT_FP_FUSION": "1"})
        done = subprocess.run([sys.executable, "-I", "-c", COMPILE, out, json.dumps({"jobs": jobs, "arches": arches})],
                              env=env, cwd=tmp, capture_output=True, text=True, timeout=timeout, check=False)
        try:
            with open(out, encoding="utf-8") as f:
                result = json.load(f)
        except (OSError, ValueError):
            raise RuntimeError(f"the compiling process gave no result (status {done.returncode}): "
                               f"{(done.stderr or '').strip()[-300:]}") from None
    if not isinstance(result, dict):
        raise RuntimeError("the compiling process gave no result")
    if isinstance(result.get("refused"), str):
        raise LearnerCompileError(result["refused"][:300])
    compiled = {}
    for arch in arches:
        rows = result.get(str(arch))
        if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == 5 and isinstance(r[0], str)
                                                 and all(type(x) is int for x in r[1:]) for r in rows):
            raise RuntimeError(f"the compiling process gave no result for sm_{arch}")
        compiled[arch] = [tuple(r) for r in rows]
    return compiled


ROOM = 32 << 20
"""Bytes the compiler's cache may need (each arch's IR, PTX and cubin: a few MB; 2 MB per file at large tiles)."""


def _roomy() -> str | None:
    """A temporary folder with room for the compiler's files: the worker's own (its private copy) where it has room,
    else the sandbox's private /dev/shm or /var/tmp (where /tmp is shared, the copy may sit on a small tmpfs)."""
    import tempfile

    for d in (tempfile.gettempdir(), "/dev/shm", "/var/tmp"):
        try:
            st = os.statvfs(d)
        except OSError:
            continue
        if st.f_bavail * st.f_frsize >= ROOM and os.access(d, os.W_OK | os.X_OK):
            return d
    return None


def _describe(name: str, kernel: str, value):
    """A launch argument as the child rebuilds it: a tensor by its dtype, a Triton dtype by its name (a constexpr such
    as `ACC_DTYPE=tl.float32`), a tuple item by item, a number, flag or text as itself. Anything else is the grader's
    limit, never the learner's failure (RuntimeError: the check is not judged)."""
    import triton.language as tl

    if isinstance(value, torch.Tensor):  # and whether a launch would take its address as 16-byte aligned
        return {"tensor": TYPES.get(value.dtype, "fp32"), "aligned": value.data_ptr() % 16 == 0}
    if isinstance(value, tl.constexpr):
        return _describe(name, kernel, value.value)
    if isinstance(value, tl.dtype):
        return {"dtype": value.name}
    if isinstance(value, (tuple, list)):
        return {"tuple": [_describe(name, kernel, v) for v in value]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    fn = getattr(value, "fn", None)  # a jit function passed as a constexpr (an inner function of the kernel's)
    if type(value).__name__ in ("JITFunction", "InterpretedFunction") and hasattr(fn, "__name__"):
        return {"jit": fn.__name__}
    raise RuntimeError(f"argument `{name}` of `{kernel}` is a {type(value).__name__}, which the grader cannot pass "
                       "to a compilation yet")


FINGERPRINT = r"""
def fingerprint(scope):
    # each jit function of a module's scope: its first line, its source's hash, the simple globals it loads
    import hashlib, inspect
    out = {}
    for name, value in list(scope.items()):
        fn = getattr(value, "fn", None)
        if type(value).__name__ not in ("JITFunction", "InterpretedFunction") or not hasattr(fn, "__code__"):
            continue
        try:
            text = inspect.getsource(fn)
        except (OSError, TypeError):
            text = ""
        names = []
        # the globals the function loads (an attribute's name, as `.T` in `k.T`, is none: the interpreter leaves names
        # of its own in the kernel's globals, and a name alike there would tell the two apart)
        import dis
        loaded = {i.argval for i in dis.get_instructions(fn) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
        for g in sorted(loaded):
            if g not in scope:  # an attribute's name, a builtin; or a module the interpreter adds to the scope as it runs
                continue
            if type(scope[g]).__name__ != "module":  # the interpreter swaps modules' contents, not what they are
                names.append(f"{g}={plain(scope[g])}")
        out[name] = [fn.__code__.co_firstlineno, hashlib.sha256(text.encode()).hexdigest(), names]
    return out


def plain(v, depth=0):
    # a global as the same text interpreted or compiled: values as themselves, jit functions alike, others by type
    kind = type(v).__name__
    if kind == "constexpr":
        return "constexpr(" + plain(getattr(v, "value", None), depth + 1) + ")"
    if v is None or isinstance(v, (bool, int, float, str)) or kind == "dtype":
        return repr(v)
    if isinstance(v, (tuple, list)) and depth < 4:
        return kind + "(" + ", ".join(plain(x, depth + 1) for x in list(v)[:64]) + ")"
    if kind in ("JITFunction", "InterpretedFunction"):
        return "jit " + getattr(getattr(v, "fn", None), "__name__", "?")
    return kind
"""
"""The same code fingerprints a module's kernels in the worker (interpreted) and in the compiling child (compiled): the
kernels compiled must be those that ran, not others the file defines when the interpreter is off."""


def _fingerprint(scope: dict) -> dict:
    names: dict = {}
    exec(FINGERPRINT, names)  # noqa: S102 - the kit's own code, above
    return names["fingerprint"](scope)


COMPILE = FINGERPRINT + r"""
import builtins, json, os, re, subprocess, sys
out, request = sys.argv[1], json.loads(sys.argv[2])
def give(result):
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f)
    sys.exit(0)
import triton
import triton.language
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler.errors import CompilationError
from triton.runtime.jit import JITFunction
tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
modules, result = {}, {str(a): [] for a in request["arches"]}
for job in request["jobs"]:
    path, name = job["path"], job["kernel"]
    if path not in modules:
        scope = {"__name__": job["module"], "__file__": path, "__builtins__": builtins}
        try:
            with open(path, encoding="utf-8") as f:
                exec(compile(f.read(), path, "exec"), scope)
        except BaseException as exc:
            give({"refused": f"executing the file with Triton's interpreter off raised {type(exc).__name__}: {exc}"})
        modules[path] = scope
    kernel = modules[path].get(name)
    if not isinstance(kernel, JITFunction):
        give({"refused": f"`{name}` is not a @triton.jit kernel at the top level of its file"})
    ours = json.loads(json.dumps(fingerprint(modules[path])))
    if ours != job["fingerprint"]:
        which = sorted(k for k in set(ours) | set(job["fingerprint"]) if ours.get(k) != job["fingerprint"].get(k))
        give({"refused": "the file defines other kernels when Triton's interpreter is off than when it is on ("
                         + ", ".join(f"`{k}`" for k in which[:3]) + "): the kernels compiled must be those that ran"})
    signature, constexprs = {}, {}
    def rebuild(v):
        if isinstance(v, dict) and "dtype" in v:
            return triton.language.dtype(v["dtype"])
        if isinstance(v, dict) and "tuple" in v:
            return tuple(rebuild(x) for x in v["tuple"])
        if isinstance(v, dict) and "jit" in v:
            found = modules[path].get(v["jit"])
            if not isinstance(found, JITFunction):
                give({"refused": f"`{v['jit']}`, passed to `{name}`, is not a @triton.jit function at the top level"})
            return found
        return v
    # specialised as a launch would (triton/runtime/jit.py's binder): a 16-byte aligned pointer and an int divisible by
    # 16 carry tt.divisibility 16, an int equal to 1 becomes the constant 1; compiled without them, a kernel takes more
    # registers than on a GPU (a tutorial-style forward: 255 and a spill where a launch compiles 165)
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.nvidia.compiler import CUDABackend
    attrs = {}
    for i, p in enumerate(kernel.params):
        value = job["args"].get(p.name)
        specialize, align = not p.do_not_specialize, not p.do_not_specialize_on_alignment
        if p.is_constexpr or value is None or (isinstance(value, dict) and "tensor" not in value):
            signature[p.name], constexprs[p.name] = "constexpr", rebuild(value)
            continue
        if isinstance(value, dict):
            kind, key = "*" + value["tensor"], ("D" if value.get("aligned") is True and specialize and align else "")
        elif isinstance(value, (bool, int, float)):
            if isinstance(value, int) and not isinstance(value, bool) and not -2 ** 63 <= value < 2 ** 64:
                give({"refused": f"argument `{p.name}` of `{name}` is an int of more than 64 bits"})
            kind, key = native_specialize_impl(CUDABackend, value, p.is_const, specialize, align)
        else:
            give({"refused": f"argument `{p.name}` of `{name}` is text: pass it as a tl.constexpr"})
        if p.annotation_type:  # an annotated parameter keeps its type (floats and flags are never specialised)
            kind = p.annotation_type
            key = None if kind == "u1" or kind[:2] in ("fp", "bf") or not specialize else key
        if kind == "constexpr":
            signature[p.name], constexprs[p.name] = "constexpr", key
            continue
        signature[p.name] = kind
        if isinstance(key, str) and key:
            attrs[(i,)] = CUDABackend.parse_attr(key)
    for arch in request["arches"]:
        try:
            done = triton.compile(ASTSource(kernel, signature, constexprs=constexprs, attrs=attrs),
                                  target=GPUTarget("cuda", arch, 32),
                                  options={"num_warps": job["warps"], "num_stages": job["stages"]})
        except CompilationError as exc:
            lines = [l for l in str(exc).strip().splitlines() if l.strip()]
            give({"refused": f"`{name}` does not compile for sm_{arch}: {lines[-1] if lines else 'no message'}"})
        except AssertionError as exc:  # Triton's own checks (num_warps a power of two, ...)
            give({"refused": f"Triton refuses to compile `{name}` with num_warps={job['warps']}, num_stages="
                             f"{job['stages']}: {str(exc)[:200] or 'an assertion of its own failed'}"})
        except OSError as exc:
            if exc.errno != 27:  # EFBIG: a file over the worker's output limit
                raise
            give({"refused": f"compiling `{name}` for sm_{arch} writes files over the worker's output limit "
                             "(--output-limit): code that large does not fit a GPU's registers either"})
        cubin = os.path.join(os.getcwd(), f"{name}_{arch}.cubin")
        with open(cubin, "wb") as f:
            f.write(done.asm["cubin"])
        usage = subprocess.run([tool, "-res-usage", cubin], capture_output=True, text=True, timeout=60, check=True)
        found = re.search(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)", usage.stdout)
        regs, stack, static, local = map(int, found.groups())  # what does not fit the registers goes to the stack
        result[str(arch)].append([name, done.metadata.shared + static, regs, stack + local, job["warps"]])
give(result)
"""
"""The child's program (compile_launches): argv = the result file, the request as JSON."""


_REACHABLE: dict = {}

PROBE_KERNEL = """import triton
import triton.language as tl


@triton.jit
def copy(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < N), mask=offs < N)
"""
"""A kernel of the kit's own: compiled once in a process sandboxed as a worker, before any submission runs."""


def unreachable(jailed: bool, preload=()) -> str | None:
    """Why a worker's compiling child cannot compile here, or None, decided by the grader before any submission runs:
    a process sandboxed as a worker is (no learner code) launches and compiles the kit's own kernel, as the on-chip
    check does. Outside bubblewrap, as root, the worker's own uid may not reach Python's files, or the sandbox may
    refuse what the compiler writes; bubblewrap binds the interpreter for the worker."""
    import importlib
    import sys
    import tempfile

    from .sandbox import Limits, enter, hidden_paths

    if jailed or os.geteuid() != 0:
        return None
    if "result" not in _REACHABLE:
        for name in preload:
            importlib.import_module(name)
        with tempfile.TemporaryDirectory(prefix="attnkit-reach-") as impl, \
                tempfile.TemporaryDirectory(prefix="attnkit-reach-scratch-") as scratch:
            with open(os.path.join(impl, "attnkit_probe_kernel.py"), "w", encoding="utf-8") as f:
                f.write(PROBE_KERNEL)
            pid = os.fork()
            if pid == 0:  # sandboxed as a worker, then it compiles as the on-chip check's child would
                code = 1
                try:
                    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
                    work, _ = enter(impl, Limits(), hidden_paths(), scratch, programs=True)
                    sys.path.insert(0, work)
                    from .kernels import interpreting, watching

                    with interpreting():
                        module = importlib.import_module("attnkit_probe_kernel")
                        x = torch.arange(20, dtype=torch.float32)
                        with watching([x]) as watch:
                            module.copy[(1,)](x, torch.empty_like(x), 20, BLOCK=32)
                    code = 0 if compile_launches(watch.launches, (80,)).get(80) else 2
                except BaseException:  # noqa: BLE001 - it cannot compile there, whatever the reason
                    code = 3
                os._exit(code)
            _, status = os.waitpid(pid, 0)
            ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        _REACHABLE["result"] = None if ok else (
            "a process sandboxed as a worker is here cannot compile a kernel (as root outside bubblewrap, its own uid "
            "may not reach Python's files, or the sandbox refuses what the compiler writes); bubblewrap binds them "
            "(ATTNKIT_SANDBOX=bwrap)")
    return _REACHABLE["result"]
