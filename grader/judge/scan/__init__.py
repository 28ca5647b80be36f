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

The modules, each importing only those above it:
  capabilities.py  the capabilities, the grader's words for each, a finding
  names.py         what a resolved dotted name is (the tables, classify())
  strings.py       strings computed without running anything, and the hatches their text names
  aliases.py       one module's nodes and what its names stand for (imports, aliases, assignments)
  handlers.py      what each kind of node refers to (imports, names and attributes, calls, strings)
  visitor.py       one module walked for its findings
  files.py         a problem's files read safely, parsed and scanned, with the siblings they import
  policy.py        what a problem's contract refuses
"""
from __future__ import annotations

from .capabilities import ESCAPES, WORDS, Capability, Finding
from .files import MAX_BYTES, MAX_DEPTH, MAX_FILES, parse, read_source, scan_source, scan_submission, scan_tree
from .names import PACKAGE, classify
from .policy import enforced, lazy_imports, memory_bound, no_autograd, refused, scan_problem

__all__ = ["ESCAPES", "MAX_BYTES", "MAX_DEPTH", "MAX_FILES", "PACKAGE", "WORDS", "Capability", "Finding", "classify",
           "enforced", "lazy_imports", "memory_bound", "no_autograd", "parse", "read_source", "refused", "scan_problem", "scan_source",
           "scan_submission", "scan_tree"]
