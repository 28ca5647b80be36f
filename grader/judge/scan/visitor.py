"""One parsed module read for findings: the visitor that walks its nodes and records what each refers to."""
from __future__ import annotations

import ast

from .aliases import Aliases
from .capabilities import WORDS, C, Capability, Finding
from .handlers import Handlers
from .names import ATTRIBUTE, CALLS_CODE, GETATTR, IMPORTERS, classify


class _Module(Handlers, Aliases):
    """One parsed module: its aliases, then its findings."""

    def __init__(self, tree: ast.Module, file: str, package: list[str], banned, line: int | None = None):
        self.file, self.banned, self.line = file, tuple(banned), line
        self.findings: list[Finding] = []
        self.siblings: list[list[str]] = []  # module paths (components under the submission) it imports
        self.nested: list[tuple[str, int]] = []  # literal code given to exec/eval: (source, line)
        super().__init__(tree, package)

    def add(self, cap: Capability, node, name: str | None = None, banned: str | None = None):
        what = WORDS[cap] if name is None else f"{WORDS[cap]} ({name})"
        if cap is C.BANNED_CALL:
            what = f"refers to {banned}, which this problem's contract bans"
        line = self.line or getattr(node, "lineno", 0) or 0
        self.findings.append(Finding(cap, self.file, int(line), what, banned, name))

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
