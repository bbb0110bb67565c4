"""No import circle among the service modules (``shared.services.*``), lazy imports inside functions included.

The import-linter layers contract in pyproject.toml names the run services' order; this checks every service module:
the strongly connected components of the whole import graph (grimp, as lint-imports builds it), none of which may
hold a service module and another module."""

from __future__ import annotations

from collections.abc import Iterable

import grimp
import pytest

SERVICES = "shared.services"


def _components(graph: grimp.ImportGraph) -> list[set[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit on a long chain)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = []
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work.append((root, iter(sorted(graph.find_modules_directly_imported_by(root)))))
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.find_modules_directly_imported_by(nxt)))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    comp: set[str] = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        comp.add(member)
                        if member == node:
                            break
                    out.append(comp)
    return out


def _service_circles(graph: grimp.ImportGraph) -> list[list[str]]:
    return sorted(sorted(comp) for comp in _components(graph)
                  if len(comp) > 1 and any(m.startswith(f"{SERVICES}.") for m in comp))


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("shared", "functions", cache_dir=None)


def test_no_service_module_is_in_an_import_circle(graph: grimp.ImportGraph) -> None:
    assert len([m for m in graph.modules if m.startswith(f"{SERVICES}.")]) > 20  # the graph holds the services
    assert _service_circles(graph) == []


def test_a_circle_through_a_lazy_import_is_found(graph: grimp.ImportGraph) -> None:
    """The check can fail: one planted import back up the layers (as a lazy import in a function would add) closes
    the circle agents -> deployments -> agent_versions -> agents."""
    graph.add_import(importer=f"{SERVICES}.agent_versions", imported=f"{SERVICES}.agents")
    try:
        assert _service_circles(graph) == [[f"{SERVICES}.agent_versions", f"{SERVICES}.agents",
                                            f"{SERVICES}.deployments"]]
    finally:
        graph.remove_import(importer=f"{SERVICES}.agent_versions", imported=f"{SERVICES}.agents")


def test_lazy_imports_are_in_the_graph(graph: grimp.ImportGraph) -> None:
    """The import inside ``agents.workflow_pins`` (channel resolution) is an edge like a top-level one."""
    lines = [d["line_contents"] for d in graph.get_import_details(importer=f"{SERVICES}.agents",
                                                                   imported=f"{SERVICES}.deployments")]
    assert lines == ["from shared.services.deployments import resolve_channel"]
