"""No import cycle between the top-level packages of ``services`` (read from the source, no import)."""

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
