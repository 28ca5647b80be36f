"""What each kind of node refers to: imports, names and attribute access, calls, string literals."""
from __future__ import annotations

import ast

from .capabilities import C
from .names import ATTRIBUTE, CALLS_CODE, GETATTR, IMPORTERS, NOT_PATCHES, PACKAGE, VALUES
from .strings import NEEDLES, STRINGS, const_str


class Handlers:
    """The findings of one node of each kind, for visitor._Module (which gives add, _reference, _maximal and,
    through aliases.Aliases, resolve, parent and the module's bindings)."""

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

