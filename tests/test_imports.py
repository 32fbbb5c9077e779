"""How the package's modules import each other: no circle (every import counts, at the top of a module or
inside a function, since a lazy import that only dodges a circle hides a seam in the wrong place), core/ never
imports dagster, and no module but the CLI's embedded driver (learning/embedded.py) runs Dagster runs in-process: a
deployment's runs are submitted to the instance."""

from __future__ import annotations

import ast
from pathlib import Path

import smolclean_dagster

PACKAGE = Path(smolclean_dagster.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """{module: the package's modules it imports}, read from the source."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py") if "sample_data" not in p.parts}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):
                    edges.add(target)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle found by a depth-first walk, each as the modules on it."""
    found, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_the_package_has_no_import_circles():
    graph = import_graph()
    assert "smolclean_dagster.core.loop" in graph and graph["smolclean_dagster.core.loop"], "the graph was read"
    assert cycles(graph) == []
    glue = "smolclean_dagster."
    assert glue + "learning.embedded" not in graph[glue + "learning.drop_learning"] | graph[glue + "factory"]


def test_the_circle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_only_the_embedded_driver_runs_dagster_runs_in_process():
    running = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
                     if any(call in p.read_text(encoding="utf-8") for call in ("execute_in_process", "materialize(")))
    assert running == ["learning/embedded.py"]
    # ... and only the CLI uses it: an asset, a sensor or the factory never drives runs from inside a run.
    graph = import_graph()
    assert {name for name, imports in graph.items() if "smolclean_dagster.learning.embedded" in imports} == {"smolclean_dagster.cli"}


def test_core_never_imports_dagster():
    for path in (PACKAGE / "core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            assert not any(n == "dagster" or n.startswith("dagster.") or n.startswith("dagster_") for n in names), path
