"""Test workflow definitions in the official WorkflowDefinition shape (schemas/v2/workflow-definition.schema.json).

``definition(...)`` fills only the schema's descriptive required members (names, positions, empty config and
inputs, edge ids, a manual trigger, empty metadata); the graph, the PortValue inputs and the settings are the
test's own. Registration validates every definition against the schema, so a test cannot pass a shape the
host would refuse.
"""

from __future__ import annotations

import copy
from typing import Any


def node(
    nid: str, type_id: str, *, config: dict[str, Any] | None = None, inputs: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "id": nid,
        "typeId": type_id,
        "name": nid,
        "position": {"x": 0, "y": 0},
        "config": config or {},
        "inputs": inputs or {},
    }


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
    return {
        "type": "connection",
        "nodeId": node_id,
        "outputKey": output_key,
        **({"optional": True} if optional else {}),
    }


def definition(
    wid: str,
    nodes: list[dict[str, Any]],
    edges: list[dict[str, Any]] | None = None,
    *,
    variables: list[dict[str, Any]] | None = None,
    settings: dict[str, Any] | None = None,
    version: str = "1.0",
    **extra: Any,
) -> dict[str, Any]:
    return {
        "id": wid,
        "name": wid,
        "version": version,
        "nodes": copy.deepcopy(nodes),
        "edges": copy.deepcopy(edges or []),
        "triggers": [{"id": "manual", "type": "manual", "enabled": True}],
        "variables": copy.deepcopy(variables or []),
        "metadata": {},
        "settings": settings or {},
        **extra,
    }


def chain(wid: str, n: int, type_id: str = "core.noop") -> dict[str, Any]:
    """``n`` nodes in a line, n0 -> n1 -> ... (the bounds and deep-graph tests)."""
    return definition(
        wid, [node(f"n{i}", type_id) for i in range(n)], [edge(f"n{i - 1}", f"n{i}") for i in range(1, n)]
    )


def noop_loop(wid: str, iterations: int) -> dict[str, Any]:
    """s -> a -> b -> a ... of no-op nodes, ``iterations`` times round: a long log from a small definition (about 4
    events a time round; one task appends many pages)."""
    return definition(
        wid,
        [node("s", "core.noop"), node("a", "core.noop"), node("b", "core.noop")],
        [edge("s", "a", eid="sa"), edge("a", "b", eid="ab"), edge("b", "a", eid="ba")],
        settings={"maxLoopbackIterations": iterations},
    )


def register_noop_loop(tenant: str, prefix: str, iterations: int) -> str:
    """Register ``noop_loop`` for ``tenant`` under a fresh id; return the id."""
    import uuid

    from shared.services.workflows import register_workflow
    from shared.wiring import get_ports

    return register_workflow(get_ports(), tenant, noop_loop(f"{prefix}-{uuid.uuid4().hex[:12]}", iterations))


SCRIPT_VARIABLE = {"name": "script", "type": "object", "required": True}


def scripted_agent(wid: str, *, then_effect: bool = False) -> dict[str, Any]:
    """The conformance agent running the run's ``script`` input (its tool calls and answer), optionally followed by a
    side-effecting node."""
    nodes = [
        node("agent", "core.agent", config={"agentId": "conformance-eval-agent"}, inputs={"input": variable("script")})
    ]
    edges = []
    if then_effect:
        nodes.append(node("effect", "core.conformance.side-effect"))
        edges.append(edge("agent", "effect", eid="e"))
    return definition(wid, nodes, edges, variables=[SCRIPT_VARIABLE])


def register_scripted_agent(tenant: str, prefix: str, *, then_effect: bool = False) -> str:
    """Register ``scripted_agent`` for ``tenant`` under a fresh id; return the id."""
    import uuid

    from shared.services.workflows import register_workflow
    from shared.wiring import get_ports

    return register_workflow(
        get_ports(), tenant, scripted_agent(f"{prefix}-{uuid.uuid4().hex[:12]}", then_effect=then_effect)
    )


def run_script(client: Any, calls: list[tuple[str, Any]], tenant: str = "tenant-a", prefix: str = "script") -> str:
    """Run the scripted agent once with ``calls`` [(tool, args), ...] and wait until the run is terminal."""
    from openwop_client.types import CreateRunRequest

    from tests.wire import wait_terminal

    script = {"calls": [{"tool": t, "args": a} for t, a in calls], "answer": "done"}
    run = client.runs_create(
        CreateRunRequest(workflowId=register_scripted_agent(tenant, prefix), inputs={"script": script})
    )
    wait_terminal(client, run.runId)
    return str(run.runId)


def tool_returned(client: Any, run_id: str) -> list[dict[str, Any]]:
    """The payloads of the run's ``agent.tool-returned`` events, in order."""
    from tests.wire import all_events

    return [e.payload for e in all_events(client, run_id) if e.type == "agent.tool-returned"]


def register_lookup_tool(host: Any, url: str) -> str:
    """Register, for tenant A, an HTTP tool looking a customer up on the loopback tool server at ``url``; its id."""
    import uuid

    from tests.wire import raw

    tool_id = f"t{uuid.uuid4().hex[:8]}.crm:lookup"
    body = {
        "toolId": tool_id,
        "description": "Look a customer up",
        "source": {"kind": "http", "url": url + "/crm/lookup"},
        "inputSchema": {
            "type": "object",
            "properties": {"customerId": {"type": "string"}},
            "required": ["customerId"],
            "additionalProperties": False,
        },
    }
    assert raw(host.base_url, "POST", "/host/openwop-serverless/tools", body, key=host.key_a).status == 201
    return tool_id


def copy_recorded_runs(templates: list[str], n: int, *, workers: int = 8) -> list[str]:
    """``n`` recorded runs, each a copy under a fresh id of one of ``templates`` (terminal runs recorded through the
    API, taken in turn): the items the engine wrote for it (run, creation facts, pinned definition, every event with
    its own ids, every tool-call record) written through the ports, then moved to the template's status. Four
    requests a run and no execution: the cheapest way to many real recordings (suites from runs, their evals)."""
    from concurrent.futures import ThreadPoolExecutor
    from dataclasses import replace

    from shared.errors import ConflictError
    from shared.ports import RunRecord
    from shared.services.run_start import new_run_id
    from shared.wiring import get_ports

    ports = get_ports()
    recorded = []
    for run_id in templates:
        rec = ports.runs.get_run(run_id)
        assert rec is not None and rec.terminal, run_id
        recorded.append(
            (
                rec,
                ports.events.read_events(run_id),
                ports.tool_calls.list_calls(run_id),
                ports.runs.get_definition(run_id),
            )
        )

    def copy(i: int) -> str:
        rec, events, calls, pinned = recorded[i % len(recorded)]
        run_id = new_run_id(ports, rec.tenant)
        now = ports.clock.iso()
        try:
            ports.runs.create_run(
                RunRecord(
                    run_id=run_id,
                    tenant=rec.tenant,
                    status="running",
                    last_seq=-1,
                    created_at=now,
                    data={**rec.data, **({"definition": pinned} if pinned is not None else {})},
                    expires_at=rec.expires_at,
                )
            )
        except ConflictError:  # the SDK sent it again after it landed (moto keeps no idempotency token)
            pass
        ports.events.copy_events(
            run_id,
            [dict(ev, runId=run_id, eventId=ports.ids.event_id(run_id, ev["sequence"])) for ev in events],
            rec.expires_at,
        )
        ports.tool_calls.put_calls(run_id, [replace(c, run_id=run_id) for c in calls], rec.expires_at)
        try:
            ports.runs.set_progress(
                run_id, -1, rec.last_seq, {"status": rec.status, "startedAt": now, "completedAt": now}
            )
        except ConflictError:  # as above: then the run is where this write put it
            copied = ports.runs.get_run(run_id)
            assert copied is not None and (copied.last_seq, copied.status) == (rec.last_seq, rec.status), run_id
        return run_id

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(copy, range(n)))
