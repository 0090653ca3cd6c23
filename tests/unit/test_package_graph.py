"""No import cycle between the top-level packages of ``services``, nor through the modules named below
(read from the source, no import)."""

import ast
from collections import defaultdict
from pathlib import Path

SERVICES = Path(__file__).resolve().parents[2] / "services"


def package_imports() -> dict[str, set[str]]:
    """Top-level package (or module) -> the other top-level ones it imports, anywhere in its files."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in SERVICES.rglob("*.py"):
        parts = path.relative_to(SERVICES).parts
        source = parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                if module.startswith("services."):
                    target = module.split(".")[1]
                    if target != source:
                        edges[source].add(target)
    return edges


def module_name(path: Path) -> str:
    """``services/teacher_scorer/engine.py`` -> ``services.teacher_scorer.engine`` (a package: its ``__init__``)."""
    parts = list(path.relative_to(SERVICES.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def module_imports() -> dict[str, set[str]]:
    """Module of ``services`` -> the other modules of ``services`` it imports, anywhere in it (an import
    inside a function too: it closes the ring when it runs)."""
    known = {module_name(path) for path in SERVICES.rglob("*.py")}
    edges: dict[str, set[str]] = defaultdict(set)
    for path in SERVICES.rglob("*.py"):
        source = module_name(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                base = node.module
                modules = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            edges[source].update(m for m in modules if m in known and m != source)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of packages that import one another in a ring (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_ring():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_two_top_level_packages_import_each_other():
    edges = package_imports()
    assert {"agent", "env_gateway", "contracts", "orchestrator"} <= set(edges)  # the walk saw the tree
    assert cycles(edges) == []


def test_the_engine_interfaces_and_the_service_adapters_are_in_no_import_ring():
    """Issue 62: ``teacher_scorer.engine`` built the engines that import it (the factory is now
    ``engine_factory``); the operations adapters import the base, the registry imports them."""
    edges = module_imports()
    # the walk sees an import inside a function (the factory imports each engine where it builds it)
    assert "services.teacher_scorer.transformers_engine" in edges["services.teacher_scorer.engine_factory"]
    rings = cycles(edges)
    for interface in ("services.teacher_scorer.engine", "services.rollout_worker.engines.base"):
        assert not [ring for ring in rings if interface in ring]
    assert not [ring for ring in rings if any(m.startswith("services.operations.") for m in ring)]
