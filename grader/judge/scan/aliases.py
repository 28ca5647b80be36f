"""One parsed module's nodes (without its `if __name__ == "__main__":` block) and what each name stands for:
imports, aliases and assignments resolved to the dotted names they may be."""
from __future__ import annotations

import ast
import builtins

from .names import IMPORTERS, PACKAGE
from .strings import const_str


def _main_guard(node) -> bool:
    """`if __name__ == "__main__":` (either way round)."""
    t = node.test if isinstance(node, ast.If) else None
    if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq)):
        return False
    sides = [t.left, t.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)


BUILTINS = frozenset(dir(builtins))


class Aliases:
    """One parsed module's nodes, their parents, and the dotted names its names stand for."""

    def __init__(self, tree: ast.Module, package: list[str]):
        self.package = package
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
