"""What a resolved dotted name is: the tables of names and patterns for each capability, and classify()."""
from __future__ import annotations

import fnmatch
import functools

from .capabilities import ESCAPES, C, Capability

PACKAGE = "attnkit_submission"
"""The package name a worker loads the submission under (run/worker.py): `import attnkit_submission.x` is a sibling."""

ATTRIBUTES = {
    C.MODES_OFF: ("DisableTorchFunction", "DisableTorchFunctionSubclass", "_DisableTorchFunction",
                  "_DisableTorchFunctionSubclass", "_DisableTorchDispatch",
                  "_disable_current_modes", "_pop_mode", "_pop_mode_temporarily", "_pop_torch_function_stack",
                  "_pop_torch_dispatch_stack", "_push_on_torch_function_stack", "_push_on_torch_dispatch_stack",
                  "_set_torch_function_mode", "_set_dispatch_mode", "_unset_dispatch_mode",
                  "_get_current_dispatch_mode", "_get_current_dispatch_mode_stack", "_get_function_stack_at",
                  "_get_dispatch_stack_at", "_len_torch_function_stack", "_len_torch_dispatch_stack",
                  "_disabled_torch_function_impl", "_disabled_torch_dispatch_impl", "_is_torch_function_mode_enabled",
                  "_ExcludeDispatchKeyGuard", "_IncludeDispatchKeyGuard", "_ForceDispatchKeyGuard",
                  "_AutoDispatchBelowAutograd", "_AutoDispatchBelowADInplaceOrView", "_DisableFuncTorch",
                  "_PreserveDispatchKeyGuard", "_RestorePythonTLSSnapshot", "_DisablePythonDispatcher"),
    C.OWN_MODES: ("TorchFunctionMode", "TorchDispatchMode", "BaseTorchFunctionMode", "__torch_function__",
                  "__torch_dispatch__"),
    C.AUTOGRAD_ENGINE: ("_execution_engine", "_ImperativeEngine", "_EngineBase", "_engine_run_backward"),
    C.GC_WALK: ("get_objects", "get_referrers", "get_referents"),
    C.FRAME_WALK: ("_getframe", "_current_frames", "_getframemodulename", "f_back", "f_globals", "f_locals",
                   "f_builtins", "f_code", "tb_frame", "gi_frame", "cr_frame", "ag_frame", "settrace", "setprofile",
                   "settrace_all_threads", "setprofile_all_threads", "currentframe", "getouterframes", "getinnerframes"),
    C.INTROSPECTION: ("__subclasses__", "__globals__", "__builtins__", "__closure__", "__code__", "__getattribute__"),
    C.IMPORT_HOOKS: ("meta_path", "path_hooks", "path_importer_cache"),
    C.NATIVE_CODE: ("ctypes",),
    C.RUN_CONTEXT: ("__file__", "__spec__", "__loader__", "__cached__"),
    C.KERNEL_RUNTIME: ("interpreter_builder", "GridExecutor", "InterpretedFunction", "JITFunction", "rewritten_fn",
                       "create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas",
                       "_init_args_hst", "_restore_args_dev", "knobs"),
}
"""Attribute names that tell what they are whatever they are read from (frame.f_back, cls.__subclasses__)."""
ATTRIBUTE = {name: cap for cap, names in ATTRIBUTES.items() for name in names}

PRIVATE = ("torch._C", "torch._VF", "torch._ops", "torch._higher_order_ops", "torch._dynamo",
           "torch._inductor", "torch._functorch", "torch._subclasses", "torch._prims", "torch._prims_common",
           "torch._refs", "torch._decomp", "torch._guards", "torch._export", "torch._lazy", "torch._dispatch",
           "torch._classes", "torch._jit_internal", "torch._tensor", "torch._utils",
           "torch._meta_registrations", "torch._python_dispatcher", "torch.utils._python_dispatch",
           "torch.utils._mode_utils")
"""torch's bindings and internals: a correct solution needs none of them (torch.finfo, torch.nn.functional, torch.ops.aten
are public, and torch.nn.init's private helpers are not listed)."""

LAZY = {"torch.utils.checkpoint": ("torch._dynamo",)}
"""Public parts of torch whose first call imports private ones, and those: torch.utils.checkpoint's first call imports
torch._dynamo (about 75 MB of objects and 2 s). A worker is measured from its hello on (run/cgroup.py); for a source that
names one, the grader imports those before the hello (grading.py), as it imports torch, so their memory is not counted
as the learner's (a correct chunked solution with checkpointed chunks once failed the memory backstop's held rule)."""

DOTTED = (
    (C.LAZY_TORCH, tuple(LAZY)),
    (C.DISPATCHER, ("torch._C._dispatch_*", "torch._C._Dispatch*", "torch.library", "torch._library",
                    "torch._custom_op*", "torch._custom_ops")),
    (C.NATIVE_CODE, ("ctypes", "_ctypes", "cffi", "numpy.ctypeslib", "torch.utils.cpp_extension",
                     "torch.ops.load_library", "torch.classes.load_library")),
    (C.FLEX_ATTENTION, ("torch.nn.attention.flex_attention",)),
    (C.AUTOGRAD, ("torch.autograd.grad", "torch.autograd.backward", "torch.autograd.functional",
                  "torch.autograd.forward_ad", "torch.autograd.gradcheck", "torch.autograd.gradgradcheck",
                  "torch.Tensor.backward", *(f"{m}.{f}" for m in ("torch.func", "functorch") for f in (
                      "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize")))),
    (C.FRAME_WALK, ("sys.monitoring", "inspect.stack", "inspect.trace", "inspect.getframeinfo", "traceback.walk_stack",
                    "traceback.walk_tb")),
    (C.INTROSPECTION, ("inspect",)),
    (C.IMPORT_HOOKS, ("sys.modules", "importlib.util", "importlib.machinery", "importlib.abc", "importlib.reload",
                      "importlib._bootstrap*", "zipimport")),
    (C.GRADER_INTERNALS, ("attnkit", "attnkit_reference")),
    (C.PROCESSES, ("os.system", "os.popen", "os.fork", "os.forkpty", "os.exec*", "os.spawn*", "os.posix_spawn*",
                   "os.kill", "os.killpg", "os.register_at_fork", "subprocess", "_posixsubprocess", "multiprocessing",
                   "torch.multiprocessing", "concurrent.futures.ProcessPoolExecutor", "concurrent.futures.process",
                   "pty", "signal.signal", "signal.setitimer", "signal.alarm", "signal.pthread_kill",
                   "signal.raise_signal", "signal.siginterrupt", "resource.setrlimit", "resource.prlimit",
                   "asyncio.create_subprocess_*", "pydoc.pager", "pydoc.pipepager", "pydoc.tempfilepager",
                   "pydoc.getpager", "webbrowser", "os.startfile")),
    (C.THREADS, ("threading.Thread", "threading.Timer", "threading._start*", "_thread",
                 "concurrent.futures.ThreadPoolExecutor", "concurrent.futures.thread", "asyncio.to_thread")),
    (C.DYNAMIC_CODE, ("pickle", "_pickle", "marshal", "dill", "cloudpickle", "runpy", "code.interact",
                      "code.InteractiveInterpreter", "code.InteractiveConsole", "codeop", "types.FunctionType",
                      "types.CodeType", "types.LambdaType", "torch.jit.CompilationUnit")),
    (C.NUMPY_BRIDGE, ("torch.from_numpy", "torch.frombuffer", "torch.from_dlpack", "torch.utils.dlpack")),
    (C.PRIVATE_TORCH, PRIVATE),
    (C.KERNEL_RUNTIME, ("triton.runtime", "triton._*", "triton.knobs", "triton.compiler", "triton.backends",
                        "triton.tools", "triton.testing", "triton.experimental", "triton.profiler", "triton.autotune",
                        "triton.Config", "triton.language.extra", "triton.language.inline_asm_elementwise",
                        "triton.language.core._*", "triton.language.semantic")),
    (C.RUN_CONTEXT, ("os.environ", "os.environb", "os.getenv", "os.getenvb", "os.getcwd", "os.getcwdb", "os.chdir",
                     "os.getpid", "os.getppid", "os.getuid", "os.geteuid", "os.getlogin", "os.uname", "os.listdir",
                     "os.scandir", "os.walk", "os.stat", "os.lstat", "os.access", "os.readlink", "os.path.exists",
                     "os.path.lexists", "os.path.isfile", "os.path.isdir", "os.path.islink", "os.path.realpath",
                     "os.path.abspath", "os.path.expanduser", "os.path.getsize", "os.path.getmtime", "pathlib", "glob",
                     "sys.argv", "sys.orig_argv", "sys.executable", "sys.prefix", "sys.exec_prefix", "sys.base_prefix",
                     "sys.base_exec_prefix", "sys.path", "socket", "platform", "getpass",
                     "tempfile")),
)
"""Dotted names (fnmatch patterns, matched on whole components) and what they are; the longest match wins."""

ATTENTION_CLASSES = ("torch.nn.MultiheadAttention", "torch.nn.modules.activation.MultiheadAttention",
                     "torch.nn.Transformer", "torch.nn.TransformerEncoder", "torch.nn.TransformerDecoder",
                     "torch.nn.TransformerEncoderLayer", "torch.nn.TransformerDecoderLayer")
"""torch classes whose forward runs F.multi_head_attention_forward."""

CALLS_CODE = {"builtins.eval", "builtins.exec", "builtins.compile"}
GETATTR = {"builtins.getattr", "builtins.hasattr", "builtins.setattr", "builtins.delattr"}
IMPORTERS = {"builtins.__import__", "importlib.import_module", "importlib.__import__"}
VALUES = CALLS_CODE | GETATTR | IMPORTERS | {"builtins.vars", "builtins.globals"}
"""Builtins that, passed around as values, reach names the grader cannot read."""
NOT_PATCHES = ("torch.backends",)
"""Module attributes a solution may set (torch.backends.cuda.matmul.allow_tf32 = False)."""

def _match(name: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern)


def classify(dotted: str, banned=()) -> list[tuple[Capability, str, str | None]]:
    """What the resolved name `dotted` is: [(capability, the kit's name of it, banned name)], most specific first;
    [] for an ordinary name."""
    return list(_classify(dotted, tuple(banned)))


@functools.lru_cache(maxsize=4096)
def _classify(dotted: str, banned: tuple) -> tuple:
    """classify's answer, kept: a submission names the same few hundred names in every file (the tables are
    constant)."""
    parts = dotted.split(".")
    found = None
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        hit = next(((cap, p) for cap, patterns in DOTTED for p in patterns if _match(prefix, p)), None)
        if hit:
            found = (hit[0], hit[1].rstrip("*").rstrip("_") if hit[1].endswith("*") else hit[1])
            break
        if i > 1 and parts[i - 1] in ATTRIBUTE:
            found = (ATTRIBUTE[parts[i - 1]], parts[i - 1])
            break
    out = [(found[0], found[1], None)] if found else []
    if parts[0] == "torch" and banned:
        names = parts[1:] + (["multi_head_attention_forward"] if any(_match(dotted, a) or dotted.startswith(a + ".")
                                                                      for a in ATTENTION_CLASSES) else [])
        hit = next((b for b in banned for n in names if n == b or (b.endswith("*") and n.startswith(b[:-1]))), None)
        if hit and not (found and found[0] is C.FLEX_ATTENTION):
            out.append((C.BANNED_CALL, hit, hit))
    if found and found[0] not in ESCAPES:  # a private path to a listed capability is still private
        private = next((p for p in PRIVATE if _match(dotted, p) or dotted.startswith(p + ".")), None)
        if private:
            out.append((C.PRIVATE_TORCH, private, None))
    return out
