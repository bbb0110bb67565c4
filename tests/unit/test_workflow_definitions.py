"""The definition loader on deep and huge graphs, and PortValue resolution (pure engine, no storage)."""

from __future__ import annotations

import sys

import pytest

from shared.engine.registry import NODE_TYPES
from shared.engine.workflow import (
    MAX_EDGES,
    MAX_NODES,
    DefinitionError,
    UnresolvedInputError,
    check_bindings,
    load_workflow,
    resolve_node_inputs,
)
from tests.workflows import chain, connection, definition, edge, node, static, variable

TYPES = set(NODE_TYPES)


def test_a_chain_at_the_node_bound_loads_without_recursion():
    # Given a 10,000-node chain, and Python's default recursion limit (other tests' libraries may raise it)
    assert MAX_NODES == 10_000
    doc = chain("deep", MAX_NODES)
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        wf = load_workflow(doc, TYPES)
    finally:
        sys.setrecursionlimit(before)
    # Then it loads: one entry, no back edge, every node reached
    assert wf.entries == ("n0",) and len(wf.node_ids) == MAX_NODES
    assert not any(e.back for e in wf.edges)


def test_a_long_cycle_is_found_iteratively():
    doc = chain("deep-loop", 5_000)
    doc["edges"].append(edge("n4999", "n1", eid="back"))
    with pytest.raises(DefinitionError, match="maxLoopbackIterations"):
        load_workflow(doc, TYPES)
    doc["settings"] = {"maxLoopbackIterations": 1}
    wf = load_workflow(doc, TYPES)
    assert [e.id for e in wf.edges if e.back] == ["back"]


def test_more_nodes_or_edges_than_the_bounds_are_refused():
    with pytest.raises(DefinitionError, match="more than 10000 nodes"):
        load_workflow(chain("huge", MAX_NODES + 1), TYPES)
    doc = chain("dense", 3)
    doc["edges"] = [edge("n0", "n1", eid=f"e{i}") for i in range(MAX_EDGES + 1)]
    with pytest.raises(DefinitionError, match="more than 20000 edges"):
        load_workflow(doc, TYPES)


def test_duplicate_edge_ids_are_refused():
    doc = definition(
        "dup",
        [node("a", "core.noop"), node("b", "core.noop"), node("c", "core.noop")],
        [edge("a", "b", eid="x"), edge("b", "c", eid="x")],
    )
    with pytest.raises(DefinitionError, match="duplicate edge id"):
        load_workflow(doc, TYPES)


def test_each_port_value_kind_resolves():
    n = node(
        "t",
        "core.tool",
        inputs={
            "s": static({"k": [1]}),
            "v": variable("who"),
            "c": connection("up", "result"),
            "o": variable("unset", optional=True),
            "oc": connection("up", "absent", optional=True),
        },
    )
    got = resolve_node_inputs(n, {"who": "ada"}, {"up": {"result": 7}})
    assert got == {"s": {"k": [1]}, "v": "ada", "c": 7}


@pytest.mark.parametrize(
    "binding",
    [
        variable("unset"),
        connection("up", "absent"),
        connection("gone", "x"),
        {"type": "expression", "expression": "1 + 1"},
    ],
)
def test_a_required_binding_without_a_value_is_an_error(binding):
    with pytest.raises(UnresolvedInputError):
        resolve_node_inputs(node("t", "core.noop", inputs={"x": binding}), {}, {"up": {"result": 1}})


def test_connections_must_name_an_upstream_node():
    nodes = [
        node("a", "core.noop"),
        node("b", "core.noop", inputs={"x": connection("a", "k")}),
        node("c", "core.noop", inputs={"x": connection("d", "k"), "self": connection("c", "k")}),
        node("d", "core.noop"),
        node("e", "core.noop", inputs={"x": connection("zz", "k")}),
    ]
    wf = load_workflow(
        definition("conn", nodes, [edge("a", "b"), edge("b", "c"), edge("a", "d"), edge("d", "e")]), TYPES
    )
    # b reads its parent; c reads a sibling branch and itself; e names no node
    assert check_bindings(wf) == [("c", "x", "not-upstream"), ("c", "self", "not-upstream"), ("e", "x", "not-upstream")]


def test_expressions_are_reported_for_refusal():
    wf = load_workflow(
        definition("expr", [node("a", "core.noop", inputs={"x": {"type": "expression", "expression": "vars.x"}})]),
        TYPES,
    )
    assert check_bindings(wf) == [("a", "x", "expression")]
