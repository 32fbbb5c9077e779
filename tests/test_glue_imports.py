"""The Dagster glue reads one way: no import circle among its modules (lazy imports inside functions count too),
and no module but the CLI's embedded driver (learning.py) runs Dagster runs in-process; a deployment's runs are
submitted to the instance."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "smolclean_dagster"


def _glue_imports() -> dict[str, set[str]]:
    """For each glue module (a flat module beside core/), the glue modules it imports anywhere in its code."""
    modules = {p.stem: p for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                found |= {node.module} if node.module else {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("smolclean_dagster."):
                found.add(node.module.split(".")[1])
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph`, as the modules along it, or None."""
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt, [*path, nxt])):
                return found
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_the_glue_modules_import_each_other_without_a_circle():
    graph = _glue_imports()
    assert {"learning", "factory", "drop_learning", "learning_sensor", "learning_runs"} <= set(graph)
    circle = _circle(graph)
    assert circle is None, " -> ".join(circle)
    assert "learning" not in graph["drop_learning"] and "learning" not in graph["factory"]


def test_the_circle_finder_finds_a_circle():
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_only_the_embedded_driver_runs_dagster_runs_in_process():
    running = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
                     if any(call in p.read_text(encoding="utf-8") for call in ("execute_in_process", "materialize(")))
    assert running == ["learning.py"]
    # ... and only the CLI uses it: an asset, a sensor or the factory never drives runs from inside a run.
    assert {name for name, imports in _glue_imports().items() if "learning" in imports} == {"cli"}
