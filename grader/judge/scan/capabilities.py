"""The capabilities the grader watches for in a submission's source, its words for each, and a finding."""
from __future__ import annotations

import enum
from dataclasses import dataclass


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
    RUN_CONTEXT = "run_context"
    KERNEL_RUNTIME = "kernel_runtime"
    LAZY_TORCH = "lazy_torch"
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
    C.RUN_CONTEXT: "reads where or how it runs (its own file's path, the environment, the files around it, the "
                   "process), which code that computes attention never needs and code that behaves differently when "
                   "graded does",
    C.KERNEL_RUNTIME: "reaches into Triton's runtime, compiler, settings or tools, autotunes, or runs inline assembly "
                      "(the grader runs and counts the kernels with Triton's interpreter; the block sizes are the "
                      "launcher's arguments)",
    C.LAZY_TORCH: "calls a part of torch whose first call imports more of torch (the grader imports that before "
                  "your code runs, so that its memory is not counted as yours)",
    C.UNREADABLE: "the grader could not read this module",
}
"""The grader's words for each capability; a finding adds the kit's own name of what it found."""

ESCAPES = frozenset(C) - {C.AUTOGRAD, C.FLEX_ATTENTION, C.BANNED_CALL, C.NUMPY_BRIDGE, C.LAZY_TORCH}
"""Refused wherever the contract is enforced inside the worker: each can switch the enforcement off, hide work
from it, or cannot be read. Four others are refused only where the contract names them (policy.refused()); LAZY_TORCH
never is: it tells the grader what to import before the worker's memory is counted (names.LAZY)."""


@dataclass(frozen=True)
class Finding:
    capability: Capability
    file: str  # the module's path in the submission, e.g. "flash_attention.py"
    line: int
    what: str  # the grader's own words, never the learner's text
    banned: str | None = None  # BANNED_CALL: the spec's banned name it matches
    name: str | None = None  # the kit's name of what was found (a table's entry: "torch.utils.checkpoint")

    def describe(self) -> str:
        return f"{self.file} line {self.line}: {self.what}"
