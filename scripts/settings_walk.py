"""Where does the whole settings tree go? A static walk of one parameter through the package.

Issue 62 measured the driver with farm-studio's walk (``walk services/orchestrator/pipeline.py:
train:settings``), which is not on this machine or the registries. This is our own, simpler walk,
so that a before-and-after can be measured with one tool on both commits:

* It starts at a function's parameter (default: ``pipeline.train``'s ``settings``) and follows the
  very object, never a piece of it: a local bound to it (``x = settings``), an attribute that holds
  it (``self.s = settings`` makes every method of that class a place that can read it, and so does
  a dataclass field or ``Stack(settings=...)``), and every call that passes it on, positionally or
  by keyword, into a function, method, class or Ray actor (``X.remote``, ``X.options(...).remote``)
  of the package that the call can be resolved to by its names and imports.
* A **room** is a function (or method) the whole tree reaches; its **fields** are the sections it
  reads off the tree itself (``settings.optim`` -> ``optim``). A room **hands it back up** when
  it returns the tree, or an object holding it, to its caller (counted per room).
* Calls that pass the tree to something the walk cannot resolve (a method of an object it does
  not track, a lambda, a library) are listed as **unresolved**, not followed.

It reads the source only (``ast``), imports nothing of it, and so also walks an older checkout::

    python scripts/settings_walk.py [--root DIR] [--start services.orchestrator.pipeline:train:settings] [--rooms]
"""

import argparse
import ast
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

Qual = str  # "package.module:Class.method" or "package.module:function"


@dataclass
class Module:
    name: str
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)  # "f", "C.m"
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)  # local name -> "module" or "module:name"


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def load_modules(root: Path, package: str) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for path in sorted((root / package).rglob("*.py")):
        name = module_name(root, path)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        mod = Module(name)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                mod.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                mod.classes[node.name] = node
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        mod.functions[f"{node.name}.{item.name}"] = item
        for node in ast.walk(tree):  # function-level imports count too (lazy imports)
            if isinstance(node, ast.Import):
                for alias in node.names:
                    mod.imports[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    mod.imports[alias.asname or alias.name] = f"{node.module}:{alias.name}"
        modules[name] = mod
    return modules


def dotted(expr: ast.expr) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else None."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        owner = dotted(expr.value)
        return f"{owner}.{expr.attr}" if owner else None
    return None


def params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]


def dataclass_fields(cls: ast.ClassDef) -> list[str]:
    return [s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]


TREE = ""  # the kind of a path bound to the tree itself; a carrier's kind is its class


@dataclass
class Walk:
    modules: dict[str, Module]
    rooms: dict[Qual, set[str]] = field(default_factory=dict)  # room -> sections read off the tree
    returns: dict[Qual, str] = field(default_factory=dict)  # room -> the kind it hands back up
    holders: dict[tuple[Qual, str], str] = field(default_factory=dict)  # (class, attribute) -> kind held
    unresolved: set[str] = field(default_factory=set)
    seen: set[tuple[Qual, frozenset[tuple[str, str]]]] = field(default_factory=set)

    # -- names, classes and calls ---------------------------------------------------------------
    def lookup(self, module: Module, name: str) -> Qual | None:
        """A name in ``module`` -> a function or class of the package."""
        if name in module.functions or name in module.classes:
            return f"{module.name}:{name}"
        target = module.imports.get(name)
        if target and ":" in target:
            mod_name, attr = target.split(":")
            mod = self.modules.get(mod_name)
            if mod is not None:
                if attr in mod.functions or attr in mod.classes:
                    return f"{mod_name}:{attr}"
                return self.lookup(mod, attr) if attr in mod.imports else None
        return None

    def bases(self, cls: Qual) -> list[Qual]:
        """``cls`` and its base classes in the package, nearest first."""
        mod_name, name = cls.split(":")
        module = self.modules[mod_name]
        found = [cls]
        for base in module.classes[name].bases:
            node = base.value if isinstance(base, ast.Subscript) else base
            owner = self.lookup(module, node.id) if isinstance(node, ast.Name) else None
            if owner is not None and owner.split(":")[1] in self.modules[owner.split(":")[0]].classes:
                found += self.bases(owner)
        return found

    def subclasses(self, cls: Qual) -> list[Qual]:
        """``cls`` and every class of the package derived from it."""
        found = []
        for mod in self.modules.values():
            for name in mod.classes:
                qual = f"{mod.name}:{name}"
                if cls in self.bases(qual):
                    found.append(qual)
        return found

    def method(self, cls: Qual, name: str) -> Qual | None:
        """``cls.name`` as the class or its nearest base defines it."""
        for owner in self.bases(cls):
            mod_name, cls_name = owner.split(":")
            if f"{cls_name}.{name}" in self.modules[mod_name].functions:
                return f"{mod_name}:{cls_name}.{name}"
        return None

    def dispatch(self, cls: Qual, name: str) -> list[Qual]:
        """What ``obj.name(...)`` may run for an object of ``cls``: its method and every override."""
        found = {self.method(sub, name) for sub in self.subclasses(cls)}
        return sorted(q for q in found if q is not None)

    def callee(self, module: Module, cls: str | None, func: ast.expr, names: dict[str, str]) -> list[Qual]:
        """The functions or classes of the package a call may run (empty: unresolved)."""
        here = f"{module.name}:{cls}" if cls else None
        if isinstance(func, ast.Name):
            if func.id == "cls" and here:  # cls(...) in a classmethod
                return [here]
            found = self.lookup(module, func.id)
            return [found] if found else []
        if not isinstance(func, ast.Attribute):
            return []
        base = func.value
        if (
            isinstance(base, ast.Call)
            and isinstance(base.func, ast.Name)
            and base.func.id == "super"
            and here
        ):
            parent = self.bases(here)[1:]
            found = self.method(parent[0], func.attr) if parent else None
            return [found] if found else []
        if func.attr == "remote":  # X.remote(...) / X.options(...).remote(...)
            inner = (
                base.func.value
                if isinstance(base, ast.Call) and isinstance(base.func, ast.Attribute)
                else base
            )
            return self.callee(module, cls, inner, names)
        if isinstance(base, ast.Name) and base.id in ("self", "cls") and here:
            return self.dispatch(here, func.attr)
        owner_kind = self.kind(module, cls, base, names)
        if owner_kind:  # a method of a carrier
            return self.dispatch(owner_kind, func.attr)
        if isinstance(base, ast.Name):
            target = module.imports.get(base.id)
            if target and ":" not in target and target in self.modules:  # module.function
                mod = self.modules[target]
                return (
                    [f"{target}:{func.attr}"]
                    if func.attr in mod.functions or func.attr in mod.classes
                    else []
                )
            owner = self.lookup(module, base.id)  # Class.classmethod(...)
            if owner is not None and owner.split(":")[1] in self.modules[owner.split(":")[0]].classes:
                found = self.method(owner, func.attr)
                return [found] if found else []
        return []

    def kind(self, module: Module, cls: str | None, expr: ast.expr, names: dict[str, str]) -> str | None:
        """What ``expr`` is: the tree (``TREE``), a carrier of it (its class), or neither (None)."""
        path = dotted(expr)
        if path is not None:
            if path in names:
                return names[path]
            owner, _, attr = path.rpartition(".")
            owner_kind = names.get(owner) if owner else None
            if owner_kind:
                for c in self.bases(owner_kind):
                    if (c, attr) in self.holders:
                        return self.holders[(c, attr)]
            return None
        if isinstance(expr, ast.Await):
            return self.kind(module, cls, expr.value, names)
        if isinstance(expr, ast.Call):
            if isinstance(expr.func, ast.Attribute) and expr.func.attr == "enter_context" and expr.args:
                return self.kind(module, cls, expr.args[0], names)
            for target in self.callee(module, cls, expr.func, names):
                mod_name, name = target.split(":")
                if name in self.modules[mod_name].classes:
                    if any(k[0] in self.bases(target) for k in self.holders):
                        return target
                elif target in self.returns:
                    return self.returns[target]
        return None

    # -- the walk -------------------------------------------------------------------------------
    def enter(self, qual: Qual, tracked: dict[str, str]) -> None:
        """``qual`` reached with ``tracked``: parameter names or ``self.attr`` -> their kind."""
        key = (qual, frozenset(tracked.items()))
        if key in self.seen:
            return
        self.seen.add(key)
        mod_name, name = qual.split(":")
        module = self.modules[mod_name]
        cls = name.split(".")[0] if "." in name else None
        self.rooms.setdefault(qual, set())
        self.body(module, cls, qual, module.functions[name], dict(tracked))

    def hold(self, cls: Qual, attr: str, kind: str) -> None:
        """``cls``'s ``attr`` holds the tree or a carrier: every method of it (and of the classes
        derived from it) that reads ``self.attr`` is a room."""
        if self.holders.get((cls, attr)) == kind:
            return
        self.holders[(cls, attr)] = kind
        for sub in self.subclasses(cls):
            mod_name, cls_name = sub.split(":")
            for name, fn in self.modules[mod_name].functions.items():
                method = name.startswith(f"{cls_name}.") and not name.endswith(".__init__")
                if method and any(
                    dotted(n) == f"self.{attr}" for n in ast.walk(fn) if isinstance(n, ast.Attribute)
                ):
                    self.enter(f"{mod_name}:{name}", {f"self.{attr}": kind})

    def body(self, module: Module, cls: str | None, qual: Qual, fn: ast.AST, names: dict[str, str]) -> None:
        """Follow the tree through one function until nothing new binds it."""
        nodes = list(ast.walk(fn))
        here = f"{module.name}:{cls}" if cls else None
        while True:
            before = (len(names), len(self.holders), len(self.returns), len(self.seen))
            for node in nodes:
                if isinstance(node, ast.Call):
                    self.call(module, cls, node, names)
            for node in nodes:
                pairs: list[tuple[ast.expr, ast.expr]] = []
                if isinstance(node, ast.Assign):
                    pairs = [(t, node.value) for t in node.targets]
                elif isinstance(node, (ast.With, ast.AsyncWith)):
                    pairs = [
                        (i.optional_vars, i.context_expr) for i in node.items if i.optional_vars is not None
                    ]
                for target, value in pairs:
                    kind = self.kind(module, cls, value, names)
                    path = dotted(target)
                    if kind is None or path is None:
                        continue
                    names[path] = kind
                    if path.startswith("self.") and path.count(".") == 1 and here:
                        self.hold(here, path[5:], kind)
            for node in nodes:
                if isinstance(node, ast.Return) and node.value is not None:
                    kind = self.kind(module, cls, node.value, names)
                    if kind is not None:
                        self.returns[qual] = kind
            if (len(names), len(self.holders), len(self.returns), len(self.seen)) == before:
                break
        for node in nodes:
            reads = isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Store)
            if reads and self.kind(module, cls, node.value, names) == TREE:
                self.rooms[qual].add(node.attr)

    def call(self, module: Module, cls: str | None, call: ast.Call, names: dict[str, str]) -> None:
        """A call that passes the tree or a carrier on, or runs a carrier's method."""
        passed: dict[int | str, str] = {}
        for i, a in enumerate(call.args):
            k = self.kind(module, cls, a, names)
            if k is not None:
                passed[i] = k
        for kw in call.keywords:
            k = self.kind(module, cls, kw.value, names) if kw.arg else None
            if k is not None and kw.arg:
                passed[kw.arg] = k
        func = call.func
        owner_kind = self.kind(module, cls, func.value, names) if isinstance(func, ast.Attribute) else None
        targets = self.callee(module, cls, func, names)
        if owner_kind:  # the carrier's method reaches the tree through what its class holds
            held = {f"self.{a}": k for (c, a), k in self.holders.items() if c in self.bases(owner_kind)}
            for target in targets:
                self.enter(target, held)
        if not passed:
            return
        if not targets:
            self.unresolved.add(f"{module.name}: {ast.unparse(func)}(...)")
            return
        for target in targets:
            mod_name, name = target.split(":")
            mod = self.modules[mod_name]
            if name in mod.classes:
                init = self.method(target, "__init__")
                if init is None:  # a dataclass: the fields hold what they are given
                    slots = dataclass_fields(mod.classes[name])
                    for where, k in passed.items():
                        slot = slots[where] if isinstance(where, int) and where < len(slots) else where
                        if isinstance(slot, str) and slot in slots:
                            self.hold(target, slot, k)
                    continue
                target, fn, skip = init, self.modules[init.split(":")[0]].functions[init.split(":")[1]], True
            else:
                fn = mod.functions[name]
                skip = "." in name and not self.is_static(fn)
            slots = params(fn)[1:] if skip else params(fn)
            wanted = {}
            for where, k in passed.items():
                slot = slots[where] if isinstance(where, int) and where < len(slots) else where
                if isinstance(slot, str) and slot in slots:
                    wanted[slot] = k
            if wanted:
                self.enter(target, wanted)
            else:
                self.unresolved.add(f"{module.name}: {ast.unparse(func)}(...) (*args)")

    @staticmethod
    def is_static(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)


def walk(root: Path, start: str) -> Walk:
    module, function, parameter = start.split(":")
    modules = load_modules(root, module.split(".")[0])
    if module not in modules or function not in modules[module].functions:
        raise SystemExit(f"settings_walk: {module}:{function} not found under {root}")
    w = Walk(modules)
    w.enter(f"{module}:{function}", {parameter: TREE})
    return w


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", type=Path, default=Path("."), help="the checkout to walk (default: here)")
    p.add_argument("--start", default="services.orchestrator.pipeline:train:settings")
    p.add_argument("--rooms", action="store_true", help="list every room with the sections it reads")
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    args = p.parse_args()
    w = walk(args.root.resolve(), args.start)
    modules = sorted({q.split(":")[0] for q in w.rooms})
    summary = {
        "rooms": len(w.rooms),
        "modules": len(modules),
        "handed_up": len(w.returns),
        "holders": len(w.holders),
        "unresolved": len(w.unresolved),
        "sections_read": len({f for fields in w.rooms.values() for f in fields}),
    }
    if args.json:
        print(
            json.dumps(
                {
                    **summary,
                    "room_list": {q: sorted(f) for q, f in sorted(w.rooms.items())},
                    "handed_up_list": sorted(w.returns),
                    "unresolved_list": sorted(w.unresolved),
                },
                indent=1,
            )
        )
        return
    print(f"the whole tree from {args.start} under {args.root}:")
    print("  " + ", ".join(f"{k} {v}" for k, v in summary.items()))
    if args.rooms:
        for q, fields in sorted(w.rooms.items()):
            up = "  (hands it back up)" if q in w.returns else ""
            print(f"  {q}: {', '.join(sorted(fields)) or '-'}{up}")
        for u in sorted(w.unresolved):
            print(f"  unresolved: {u}")


if __name__ == "__main__":
    sys.exit(main())
