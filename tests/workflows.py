"""Test workflow definitions in the official WorkflowDefinition shape (schemas/v2/workflow-definition.schema.json).

``definition(...)`` fills only the schema's descriptive required members (names, positions, empty config and
inputs, edge ids, a manual trigger, empty metadata); the graph, the PortValue inputs and the settings are the
test's own. Registration validates every definition against the schema, so a test cannot pass a shape the
host would refuse.
"""

from __future__ import annotations

import copy
from typing import Any


def node(nid: str, type_id: str, *, config: dict[str, Any] | None = None,
         inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": nid, "typeId": type_id, "name": nid, "position": {"x": 0, "y": 0},
            "config": config or {}, "inputs": inputs or {}}


def edge(source: str, target: str, rule: str | None = None, eid: str | None = None) -> dict[str, Any]:
    e = {"id": eid or f"{source}-{target}", "sourceNodeId": source, "targetNodeId": target}
    if rule is not None:
        e["triggerRule"] = rule
    return e


def static(value: Any) -> dict[str, Any]:
    return {"type": "static", "value": value}


def variable(name: str, *, optional: bool = False) -> dict[str, Any]:
    return {"type": "variable", "variableName": name, **({"optional": True} if optional else {})}


def connection(node_id: str, output_key: str, *, optional: bool = False) -> dict[str, Any]:
    return {"type": "connection", "nodeId": node_id, "outputKey": output_key,
            **({"optional": True} if optional else {})}


def definition(wid: str, nodes: list[dict[str, Any]], edges: list[dict[str, Any]] | None = None, *,
               variables: list[dict[str, Any]] | None = None, settings: dict[str, Any] | None = None,
               version: str = "1.0", **extra: Any) -> dict[str, Any]:
    return {"id": wid, "name": wid, "version": version, "nodes": copy.deepcopy(nodes),
            "edges": copy.deepcopy(edges or []), "triggers": [{"id": "manual", "type": "manual", "enabled": True}],
            "variables": copy.deepcopy(variables or []), "metadata": {}, "settings": settings or {}, **extra}


def chain(wid: str, n: int, type_id: str = "core.noop") -> dict[str, Any]:
    """``n`` nodes in a line, n0 -> n1 -> ... (the bounds and deep-graph tests)."""
    return definition(wid, [node(f"n{i}", type_id) for i in range(n)],
                      [edge(f"n{i - 1}", f"n{i}") for i in range(1, n)])
