"""What a submission's source refers to, read by the grader without running it: the escape hatches from the rules
a worker enforces with torch's modes (banned calls, the memory measurement, autograd refused).

Each problem's file is parsed here, on the grader's side (never imported), with the sibling modules it imports
from the submission. A finding is (capability, file, line, the grader's own words): no text of the learner's
source is ever repeated, only line numbers and the kit's names of what was found. Names are resolved through
imports and aliases (`import torch._C as C`, `from torch.utils._python_dispatch import _disable_current_modes
as d`, `m = torch._C`), attribute chains, `getattr` with a literal name, `__import__` / `importlib.import_module`
of a literal, `sys.modules[...]`, `vars(m)[...]`; what cannot be read statically (eval, exec, compile, a computed
name given to getattr on a module, to `__import__` or to importlib) is itself a finding, DYNAMIC_CODE.

Code under `if __name__ == "__main__":` never runs when the grader imports the module: it is not read.

`refused(problem, finding)` says which findings the problem's contract refuses (judge/stages/capabilities.py
fails the problem for them); every finding is listed in the reports, for the interviewer to judge.
"""
from __future__ import annotations

import ast
import builtins
import enum
import fnmatch
import os
import re
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "attnkit_submission"
"""The package name a worker loads the submission under (run/worker.py): `import attnkit_submission.x` is a sibling."""

MAX_BYTES = 1 << 18
"""Larger files are not read (and say so): no solution comes near."""
MAX_FILES = 64
"""Modules read for one problem, its own and the siblings it imports (transitively)."""
MAX_DEPTH = 3
"""How deep literal code given to exec/eval is read."""


class Capability(enum.Enum):
    MODES_OFF = "modes_off"
    OWN_MODES = "own_modes"
    AUTOGRAD_ENGINE = "autograd_engine"
    AUTOGRAD = "autograd"
    CLEAR_REFS = "clear_refs"
    PROC_FILES = "proc_files"
    NATIVE_CODE = "native_code"
    GC_WALK = "gc_walk"
    FRAME_WALK = "frame_walk"
    INTROSPECTION = "introspection"
    PRIVATE_TORCH = "private_torch"
    DISPATCHER = "dispatcher"
    FLEX_ATTENTION = "flex_attention"
    BANNED_CALL = "banned_call"
    DYNAMIC_CODE = "dynamic_code"
    IMPORT_HOOKS = "import_hooks"
    GRADER_INTERNALS = "grader_internals"
    PATCHES_MODULES = "patches_modules"
    PROCESSES = "processes"
    THREADS = "threads"
    NUMPY_BRIDGE = "numpy_bridge"
    UNREADABLE = "unreadable"


C = Capability

WORDS = {
    C.MODES_OFF: "switches off or reads the torch modes the grader enforces the contract with",
    C.OWN_MODES: "intercepts torch calls with a torch mode of its own",
    C.AUTOGRAD_ENGINE: "touches the autograd engine itself",
    C.AUTOGRAD: "uses automatic differentiation",
    C.CLEAR_REFS: "names /proc/self/clear_refs, which resets the kernel's memory counters",
    C.PROC_FILES: "names a file under /proc, the process's kernel state",
    C.NATIVE_CODE: "loads or calls native code",
    C.GC_WALK: "walks the garbage collector's objects",
    C.FRAME_WALK: "walks or traces the interpreter's stack frames",
    C.INTROSPECTION: "reaches objects through Python's internals",
    C.PRIVATE_TORCH: "uses a private part of torch",
    C.DISPATCHER: "registers operators or kernels in torch's dispatcher",
    C.FLEX_ATTENTION: "uses flex_attention",
    C.BANNED_CALL: "refers to a function this problem's contract bans",
    C.DYNAMIC_CODE: "dynamic access the grader cannot read",
    C.IMPORT_HOOKS: "changes or reads Python's import machinery",
    C.GRADER_INTERNALS: "reaches into the grader's own modules",
    C.PATCHES_MODULES: "replaces an attribute of a module or of a torch class",
    C.PROCESSES: "starts processes, sends signals or changes the process's limits",
    C.THREADS: "runs code in other threads, where torch's modes do not hold",
    C.NUMPY_BRIDGE: "makes tensors from NumPy arrays, computed outside torch",
    C.UNREADABLE: "the grader could not read this module",
}
"""The grader's words for each capability; a finding adds the kit's own name of what it found."""

ESCAPES = frozenset(C) - {C.AUTOGRAD, C.FLEX_ATTENTION, C.BANNED_CALL, C.NUMPY_BRIDGE}
"""Refused wherever the contract is enforced inside the worker: each can switch the enforcement off, hide work
from it, or cannot be read. The other four are refused only where the contract names them (refused())."""


@dataclass(frozen=True)
class Finding:
    capability: Capability
    file: str  # the module's path in the submission, e.g. "flash_attention.py"
    line: int
    what: str  # the grader's own words, never the learner's text
    banned: str | None = None  # BANNED_CALL: the spec's banned name it matches

    def describe(self) -> str:
        return f"{self.file} line {self.line}: {self.what}"


# -- what a resolved name is -----------------------------------------------------------------------------------

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

DOTTED = (
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
    (C.IMPORT_HOOKS, ("sys.modules", "importlib.util", "importlib.machinery", "importlib.abc", "importlib.reload",
                      "importlib._bootstrap*", "zipimport")),
    (C.GRADER_INTERNALS, ("attnkit", "attnkit_reference")),
    (C.PROCESSES, ("os.system", "os.popen", "os.fork", "os.forkpty", "os.exec*", "os.spawn*", "os.posix_spawn*",
                   "os.kill", "os.killpg", "os.register_at_fork", "subprocess", "_posixsubprocess", "multiprocessing",
                   "torch.multiprocessing", "concurrent.futures.ProcessPoolExecutor", "concurrent.futures.process",
                   "pty", "signal.signal", "signal.setitimer", "signal.alarm", "signal.pthread_kill",
                   "signal.raise_signal", "signal.siginterrupt", "resource.setrlimit", "resource.prlimit",
                   "asyncio.create_subprocess_*")),
    (C.THREADS, ("threading.Thread", "threading.Timer", "threading._start*", "_thread",
                 "concurrent.futures.ThreadPoolExecutor", "concurrent.futures.thread", "asyncio.to_thread")),
    (C.DYNAMIC_CODE, ("pickle", "_pickle", "marshal", "dill", "cloudpickle", "runpy", "code.interact",
                      "code.InteractiveInterpreter", "code.InteractiveConsole", "codeop", "types.FunctionType",
                      "types.CodeType", "types.LambdaType", "torch.jit.CompilationUnit")),
    (C.NUMPY_BRIDGE, ("torch.from_numpy", "torch.frombuffer", "torch.from_dlpack", "torch.utils.dlpack")),
    (C.PRIVATE_TORCH, PRIVATE),
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

STRINGS = (
    ("clear_refs", C.CLEAR_REFS, None),
    ("/proc/", C.PROC_FILES, None),
    ("torch._C", C.PRIVATE_TORCH, "torch._C"),
    ("_python_dispatch", C.PRIVATE_TORCH, "torch.utils._python_dispatch"),
    *((name, cap, name) for name, cap in ATTRIBUTE.items() if len(name) > 8),
)
"""Text in a string literal (not a docstring) that names a hatch: getattr(x, s), attrgetter, open(path, "w")."""
NEEDLES = re.compile("|".join(re.escape(needle) for needle, _, _ in STRINGS))


def _match(name: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern)


def classify(dotted: str, banned=()) -> list[tuple[Capability, str, str | None]]:
    """What the resolved name `dotted` is: [(capability, the kit's name of it, banned name)], most specific first;
    [] for an ordinary name."""
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


# -- constant strings ----------------------------------------------------------------------------------------------

def const_str(node) -> str | None:
    """The value of a string the grader can compute without running anything: a literal, "a" + "b", an f-string
    of literals, "".join of literals; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        v = node.value
        return v if isinstance(v, str) else v.decode("latin-1")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = const_str(node.left), const_str(node.right)
        return a + b if a is not None and b is not None else None
    if isinstance(node, ast.JoinedStr):
        parts = [const_str(v.value if isinstance(v, ast.FormattedValue) and v.format_spec is None and v.conversion == -1
                           else v) for v in node.values]
        return "".join(parts) if all(p is not None for p in parts) else None
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], (ast.List, ast.Tuple))):
        sep, parts = const_str(node.func.value), [const_str(e) for e in node.args[0].elts]
        return sep.join(parts) if sep is not None and all(p is not None for p in parts) else None
    return None


# -- one module ----------------------------------------------------------------------------------------------------

def _main_guard(node) -> bool:
    """`if __name__ == "__main__":` (either way round)."""
    t = node.test if isinstance(node, ast.If) else None
    if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq)):
        return False
    sides = [t.left, t.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)


BUILTINS = frozenset(dir(builtins))


class _Module:
    """One parsed module: its aliases, then its findings."""

    def __init__(self, tree: ast.Module, file: str, package: list[str], banned, line: int | None = None):
        self.file, self.package, self.banned, self.line = file, package, tuple(banned), line
        self.findings: list[Finding] = []
        self.siblings: list[list[str]] = []  # module paths (components under the submission) it imports
        self.nested: list[tuple[str, int]] = []  # literal code given to exec/eval: (source, line)
        assigns_name = any(isinstance(n, ast.Name) and n.id == "__name__" and isinstance(n.ctx, ast.Store)
                           for n in ast.walk(tree))
        skipped = set()
        if not assigns_name:
            for stmt in tree.body:
                if _main_guard(stmt):
                    skipped |= {id(n) for s in stmt.body for n in ast.walk(s)}
        self.nodes = [n for n in ast.walk(tree) if id(n) not in skipped]
        self.parent = {}
        for n in self.nodes:
            for child in ast.iter_child_nodes(n):
                self.parent[id(child)] = n
        self.docstrings = {id(n.value) for n in self.nodes if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
                           and isinstance(n.value.value, (str, bytes))}
        self.aliases: dict[str, set[str]] = {}
        self.bound: set[str] = set()  # names bound other than by an import (a local `getattr` is not the builtin)
        self.defines_backward = False
        self.memo: dict[int, frozenset] = {}
        self._collect()

    # aliases
    def _collect(self):
        assigns = []
        for n in self.nodes:
            if isinstance(n, ast.Import):
                for a in n.names:
                    self._alias(a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0])
            elif isinstance(n, ast.ImportFrom):
                base = self._from_base(n)
                for a in n.names:
                    if a.name != "*" and base is not None:
                        self._alias(a.asname or a.name, f"{base}.{a.name}")
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.bound.add(n.name)
                self.defines_backward |= n.name == "backward"
            elif isinstance(n, ast.arg):
                self.bound.add(n.arg)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                self.bound.add(n.id)
            elif isinstance(n, ast.ExceptHandler) and n.name:
                self.bound.add(n.name)
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.For, ast.AsyncFor)):
                assigns.append(n)
        for _ in range(8):  # aliases of aliases, in any order
            before = sum(len(v) for v in self.aliases.values())
            self.memo.clear()
            for n in assigns:
                if isinstance(n, ast.Assign):
                    for t in n.targets:
                        self._bind(t, n.value)
                elif isinstance(n, (ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
                    self._bind(n.target, n.value)
                elif isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.iter, (ast.List, ast.Tuple, ast.Set)):
                    for e in n.iter.elts:
                        self._bind(n.target, e)
            if sum(len(v) for v in self.aliases.values()) == before:
                break
        self.memo.clear()

    def _alias(self, name: str, dotted: str):
        self.aliases.setdefault(name, set()).add(dotted)

    def _bind(self, target, value):
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
            for t, v in zip(target.elts, value.elts):
                self._bind(t, v)
        elif isinstance(target, ast.Name):
            for d in self.resolve(value):
                self._alias(target.id, d)

    def _from_base(self, n: ast.ImportFrom) -> str | None:
        """The absolute module of `from X import ...`; a sibling's as attnkit_submission.<path>."""
        if not n.level:
            return n.module
        keep = len(self.package) - (n.level - 1)
        if keep < 0:
            return None
        return ".".join([PACKAGE, *self.package[:keep], *([n.module] if n.module else [])])

    # resolution
    def resolve(self, node) -> frozenset:
        """The dotted names `node` may stand for (empty: none the grader can tell)."""
        key = id(node)
        if key not in self.memo:
            self.memo[key] = frozenset()  # a cycle resolves to nothing
            self.memo[key] = frozenset(list(self._resolve(node))[:16])
        return self.memo[key]

    def _resolve(self, node) -> set:
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return set(self.aliases[node.id])
            if node.id in BUILTINS and node.id not in self.bound:
                return {f"builtins.{node.id}"}
            return set()
        if isinstance(node, ast.Attribute):
            return {f"{d}.{node.attr}" for d in self.resolve(node.value)}
        if isinstance(node, ast.NamedExpr):
            return set(self.resolve(node.value))
        if isinstance(node, ast.Call):
            funcs = self.resolve(node.func)
            if funcs & {"builtins.getattr"} and len(node.args) >= 2:
                name = const_str(node.args[1])
                return {f"{d}.{name}" for d in self.resolve(node.args[0])} if name else set()
            if funcs & IMPORTERS and node.args:
                name = const_str(node.args[0])
                if not name or name.startswith("."):
                    return set()
                fromlist = (node.args[3] if len(node.args) > 3 else
                            next((k.value for k in node.keywords if k.arg == "fromlist"), None))
                whole = "importlib.import_module" in funcs or (fromlist is not None and not (
                    isinstance(fromlist, ast.Constant) and not fromlist.value))
                return {name if whole else name.split(".")[0]}
            if funcs & {"sys.modules.get"} and node.args and const_str(node.args[0]):
                return {const_str(node.args[0])}
            return set()
        if isinstance(node, ast.Subscript):
            key = const_str(node.slice)
            if key is None:
                return set()
            if self.resolve(node.value) & {"sys.modules"}:
                return {key}
            inner = node.value
            if isinstance(inner, ast.Attribute) and inner.attr == "__dict__":
                return {f"{d}.{key}" for d in self.resolve(inner.value)}
            if isinstance(inner, ast.Call) and inner.args:
                funcs = self.resolve(inner.func)
                if "builtins.vars" in funcs:
                    return {f"{d}.{key}" for d in self.resolve(inner.args[0])}
            if isinstance(inner, ast.Call) and self.resolve(inner.func) & {"builtins.globals"}:
                return set(self.aliases.get(key, ())) or ({f"builtins.{key}"} if key in BUILTINS else set())
        return set()

    # findings
    def add(self, cap: Capability, node, name: str | None = None, banned: str | None = None):
        what = WORDS[cap] if name is None else f"{WORDS[cap]} ({name})"
        if cap is C.BANNED_CALL:
            what = f"refers to {banned}, which this problem's contract bans"
        line = self.line or getattr(node, "lineno", 0) or 0
        self.findings.append(Finding(cap, self.file, int(line), what, banned))

    def _reference(self, node, dotted_names):
        for dotted in sorted(dotted_names):
            for cap, name, banned in classify(dotted, self.banned):
                self.add(cap, node, name, banned)

    def _maximal(self, node) -> bool:
        """Is node the whole of the name it resolves to (not the `torch` of `torch._C`)?"""
        p = self.parent.get(id(node))
        if isinstance(p, ast.Attribute) and p.value is node:
            return not self.resolve(p)
        if isinstance(p, ast.Subscript) and p.value is node:
            return not self.resolve(p)
        if isinstance(p, ast.Call) and p.args and p.args[0] is node and self.resolve(p.func) & {"builtins.getattr"}:
            return not self.resolve(p)
        if isinstance(p, ast.Call) and p.func is node and (self.resolve(node) & (CALLS_CODE | GETATTR | IMPORTERS)):
            return False  # the call itself is what is judged
        return True

    def scan(self):
        for n in self.nodes:
            if isinstance(n, ast.Import):
                for a in n.names:
                    self._import(n, a.name)
            elif isinstance(n, ast.ImportFrom):
                base = self._from_base(n)
                if base is None:
                    continue
                self._import(n, base, [a.name for a in n.names if a.name != "*"])
                for a in n.names:
                    if a.name != "*":
                        self._reference(n, {f"{base}.{a.name}"})
            elif isinstance(n, (ast.Name, ast.Attribute, ast.Subscript)):
                self._name(n)
            elif isinstance(n, ast.Call):
                self._call(n)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and ATTRIBUTE.get(n.name) is C.OWN_MODES:
                self.add(C.OWN_MODES, n, n.name)  # __torch_function__ / __torch_dispatch__ of its own
            if isinstance(n, (ast.Constant, ast.JoinedStr, ast.BinOp)) and id(n) not in self.docstrings:
                self._string(n)
        return self

    def _import(self, node, module: str, names=()):
        if module.split(".")[0] == PACKAGE:
            parts = module.split(".")[1:]
            self.siblings += [parts + [n] for n in names] + [parts]
            return
        self._reference(node, {module})
        parts = module.split(".")  # `import helper`, `from helper import f`: the worker puts the folder on sys.path
        self.siblings += [parts + [n] for n in names] + [parts]

    def _name(self, n):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            return  # a binding, not a use
        names = self.resolve(n)
        if isinstance(n, ast.Attribute) and not names:
            if n.attr in ATTRIBUTE and self._maximal(n):
                self.add(ATTRIBUTE[n.attr], n, n.attr)
            return
        if isinstance(n, ast.Name) and not names:
            if n.id == "__builtins__":
                self.add(C.INTROSPECTION, n, "__builtins__")
            elif n.id in ATTRIBUTE and n.id not in self.bound and isinstance(n.ctx, ast.Load):
                self.add(ATTRIBUTE[n.id], n, n.id)  # from a star import
            return
        if not names:
            return
        p = self.parent.get(id(n))
        if isinstance(n, ast.Subscript) and self.resolve(n.value) & {"sys.modules"}:
            self.add(C.IMPORT_HOOKS, n, "sys.modules")
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del)):
            if not any(d == x or d.startswith(x + ".") for d in names for x in NOT_PATCHES):
                self.add(C.PATCHES_MODULES, n)
        if names & VALUES and not (isinstance(p, ast.Call) and p.func is n):
            self.add(C.DYNAMIC_CODE, n, "a builtin that reaches names, passed as a value")
        if isinstance(n, ast.Attribute) and n.attr == "__dict__" and not self._literal_key(p):
            self.add(C.DYNAMIC_CODE, n, "a module's __dict__")
        if self._maximal(n):
            self._reference(n, names)

    @staticmethod
    def _literal_key(parent) -> bool:
        """Is `parent` a subscript by a key the grader can read (m.__dict__["x"], globals()["x"])?"""
        return isinstance(parent, ast.Subscript) and const_str(parent.slice) is not None

    def _call(self, n):
        funcs = self.resolve(n.func)
        arg = n.args[0] if n.args else None
        if funcs & CALLS_CODE:
            self.add(C.DYNAMIC_CODE, n, "eval, exec or compile")
            text = const_str(arg) if arg is not None else None
            if text is not None:
                self.nested.append((text, self.line or n.lineno))
        if funcs & GETATTR and len(n.args) >= 2:
            name = const_str(n.args[1])
            target = self.resolve(n.args[0])
            if name is None and target:
                self.add(C.DYNAMIC_CODE, n, "getattr, setattr or hasattr with a computed name on a module")
            elif name is not None:
                if name in ATTRIBUTE and not target:
                    self.add(ATTRIBUTE[name], n, name)
                if funcs & {"builtins.setattr", "builtins.delattr"} and target and not any(
                        d == x or d.startswith(x + ".") for d in target for x in NOT_PATCHES):
                    self.add(C.PATCHES_MODULES, n)
                if funcs & {"builtins.setattr", "builtins.delattr", "builtins.hasattr"} and target:
                    self._reference(n, {f"{d}.{name}" for d in target})
                elif self._maximal(n):
                    self._reference(n, self.resolve(n))
        if funcs & IMPORTERS:
            name = const_str(arg) if arg is not None else None
            if name is None:
                self.add(C.DYNAMIC_CODE, n, "an import of a computed name")
            elif name.startswith(".") or name.split(".")[0] == PACKAGE:
                parts = name.lstrip(".").split(".") if name.startswith(".") else name.split(".")[1:]
                self.siblings.append((self.package if name.startswith(".") else []) + [p for p in parts if p])
            else:
                self._reference(n, {name})  # the module it imports, whatever the call's value is used for
                self.siblings.append(name.split("."))
        if funcs & {"builtins.vars"} and arg is not None and self.resolve(arg) and not self._literal_key(
                self.parent.get(id(n))):
            self.add(C.DYNAMIC_CODE, n, "vars() of a module")
        if funcs & {"builtins.globals"} and not self._literal_key(self.parent.get(id(n))):
            self.add(C.DYNAMIC_CODE, n, "globals()")
        if funcs & {"operator.attrgetter", "operator.methodcaller"}:
            names = [const_str(a) for a in n.args[:1 if "operator.methodcaller" in funcs else None]]
            if any(x is None for x in names):
                self.add(C.DYNAMIC_CODE, n, "operator.attrgetter or methodcaller with a computed name")
            for x in names:
                for part in (x or "").split("."):
                    if part in ATTRIBUTE:
                        self.add(ATTRIBUTE[part], n, part)
        if (isinstance(n.func, ast.Attribute) and n.func.attr == "backward" and not funcs
                and not self.defines_backward):
            self.add(C.AUTOGRAD, n, ".backward()")  # a module of its own with a backward method is not autograd

    def _string(self, n):
        p = self.parent.get(id(n))
        if isinstance(p, (ast.BinOp, ast.JoinedStr, ast.FormattedValue)) and const_str(p) is not None:
            return  # judged as the whole string
        if isinstance(n, ast.FormattedValue):
            return
        text = const_str(n)
        if text is None:
            parts = [v for v in getattr(n, "values", ()) if isinstance(v, ast.Constant)]
            text = "\x00".join(str(v.value) for v in parts) if parts else None
        if not text or not NEEDLES.search(text):
            return
        seen = set()
        for needle, cap, name in STRINGS:
            if needle in text and cap not in seen:
                seen.add(cap)
                self.add(cap, n, name)


# -- a problem's modules -------------------------------------------------------------------------------------------

def _shown(rel: str) -> str:
    """A file name as the reports show it: ASCII, with anything else escaped."""
    return rel.encode("ascii", "backslashreplace").decode("ascii").replace("\n", "\\n")


def read_source(path: Path, root: Path) -> tuple[bytes | None, str | None]:
    """(the file's bytes, None) or (None, why not): a regular file inside the submission, of at most MAX_BYTES; a
    FIFO, a device or a link out of the submission is never opened for reading."""
    try:
        real = path.resolve(strict=True)
        if not real.is_relative_to(root.resolve()):
            return None, "it is a link to a file outside the submission"
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
    except (OSError, RuntimeError, ValueError):
        return None, "it could not be opened"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "it is not a regular file"
        if st.st_size > MAX_BYTES:
            return None, f"it is larger than {MAX_BYTES // 1024} KB"
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_BYTES:
            return None, f"it is larger than {MAX_BYTES // 1024} KB"
        return b"".join(chunks), None
    except OSError:
        return None, "it could not be read"
    finally:
        os.close(fd)


def parse(source: bytes | str, name: str) -> tuple[ast.Module | None, str | None]:
    """The module's tree, or (None, why it does not parse)."""
    try:
        with warnings.catch_warnings():  # invalid escapes and the like: the learner's own warnings, not ours
            warnings.simplefilter("ignore")
            return ast.parse(source, filename=name), None
    except SyntaxError as exc:
        return None, f"it does not parse as Python (line {int(exc.lineno or 0)})"
    except (ValueError, MemoryError, RecursionError, OverflowError):
        return None, "it does not parse as Python"


def scan_tree(tree: ast.Module, file: str, package=(), banned=(), line: int | None = None, depth: int = 0):
    """(findings, sibling module paths) of one parsed module; literal code given to exec/eval is read too."""
    try:
        module = _Module(tree, file, list(package), banned, line).scan()
    except RecursionError:
        return [Finding(C.UNREADABLE, file, line or 0, f"{WORDS[C.UNREADABLE]} (it is nested too deeply)")], []
    findings, siblings = list(module.findings), list(module.siblings)
    for text, at in module.nested:
        inner, _ = parse(text, file)
        if inner is not None and depth < MAX_DEPTH:
            more, sib = scan_tree(inner, file, package, banned, at, depth + 1)
            findings += more
            siblings += sib
    return findings, siblings


def scan_source(source: bytes | str, file: str = "<source>", banned=()) -> list[Finding]:
    """The findings of one module's source (no siblings followed): for tests and tools."""
    tree, why = parse(source, file)
    if tree is None:
        return [Finding(C.UNREADABLE, file, _line(why), f"{WORDS[C.UNREADABLE]} ({why})")]
    return _unique(scan_tree(tree, file, (), banned)[0])


def _line(why: str) -> int:
    digits = why.rsplit("line ", 1)[-1].rstrip(")")
    return int(digits) if "line " in why and digits.isdigit() else 0


def _module_file(root: Path, parts: list[str]) -> list[tuple[Path, list[str]]]:
    """The files importing `parts` (under the submission) runs: each package's __init__.py, then the module;
    (path, its package's components)."""
    if not parts or not all(p.isidentifier() for p in parts):
        return []
    out = []
    for i in range(1, len(parts)):  # the submission's own __init__.py is never run (run/loader.py)
        init = root.joinpath(*parts[:i], "__init__.py")
        if init.is_file():
            out.append((init, parts[:i]))
    as_module, as_package = root.joinpath(*parts[:-1], parts[-1] + ".py"), root.joinpath(*parts, "__init__.py")
    if as_module.exists() or as_module.is_symlink():
        out.append((as_module, parts[:-1]))
    elif as_package.is_file():
        out.append((as_package, parts))
    return out


def scan_submission(impl, module: str, banned=()) -> list[Finding]:
    """The findings of `<impl>/<module>.py` and of every module of the submission it imports, in order of file and
    line. A missing file gives none (the problem is not started); one the grader cannot read or parse gives one
    UNREADABLE finding."""
    root = Path(impl)
    first = root / f"{module}.py"
    if not (first.exists() or first.is_symlink()):
        return []
    todo, seen, findings = [(first, [])], set(), []
    while todo:
        path, package = todo.pop(0)
        rel = _shown(os.path.relpath(path, root))
        if rel in seen:
            continue
        seen.add(rel)
        if len(seen) > MAX_FILES:
            findings.append(Finding(C.UNREADABLE, rel, 0, f"{WORDS[C.UNREADABLE]} (more than {MAX_FILES} modules)"))
            break
        data, why = read_source(path, root)
        tree = None
        if data is not None:
            tree, why = parse(data, rel)
        if tree is None:
            findings.append(Finding(C.UNREADABLE, rel, _line(why), f"{WORDS[C.UNREADABLE]} ({why})"))
            continue
        found, siblings = scan_tree(tree, rel, package, banned)
        findings += found
        for parts in siblings:
            todo += [t for t in _module_file(root, parts) if _shown(os.path.relpath(t[0], root)) not in seen]
    return _unique(findings)


def _unique(findings) -> list[Finding]:
    """One finding per capability, file and line (the first one's words), in order of file (as read) and line."""
    order = {f.file: i for i, f in reversed(list(enumerate(findings)))}
    out, seen = [], set()
    for f in sorted(findings, key=lambda f: (order[f.file], f.line)):
        if (f.capability, f.file, f.line) not in seen:
            seen.add((f.capability, f.file, f.line))
            out.append(f)
    return out


# -- what a problem's contract refuses -------------------------------------------------------------------------------

def no_autograd(problem) -> bool:
    """The problem returns gradients computed by hand: its calls refuse autograd (draw/scenarios.py)."""
    return bool(problem.returns) and all(out.role == "gradient" for out in problem.returns)


def memory_bound(problem) -> bool:
    return problem.memory is not None or bool(problem.memory_backstop)


def enforced(problem) -> list[str]:
    """What of the problem's contract the worker enforces with torch's modes, in words ([] for nothing)."""
    return (["banned calls"] if problem.banned else []) + (["a memory bound"] if memory_bound(problem) else []) + (
        ["no automatic differentiation"] if no_autograd(problem) else [])


def _bans(problem, name: str) -> bool:
    return any(name == b or (b.endswith("*") and name.startswith(b[:-1])) for b in problem.banned)


def refused(problem, finding: Finding) -> bool:
    """Does the problem's contract refuse what the finding uses?"""
    cap = finding.capability
    if cap in ESCAPES:
        return bool(enforced(problem))
    if cap is C.AUTOGRAD:
        return no_autograd(problem)
    if cap is C.FLEX_ATTENTION:
        return _bans(problem, "flex_attention")
    if cap is C.BANNED_CALL:
        return finding.banned is not None and _bans(problem, finding.banned)
    if cap is C.NUMPY_BRIDGE:
        return memory_bound(problem)
    return False


def scan_problem(impl, problem) -> list[Finding]:
    return scan_submission(impl, problem.id, problem.banned)
