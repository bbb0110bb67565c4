"""Runs at the sizes issue 15 names: a 10,000-node workflow, a 2,000-node chain, an agent making thousands of tool
calls. They complete, at Python's default recursion limit, and the run item each append rewrites stays small (the
definition and a large folded state live beside it, written once per run or per task)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from openwop_client.types import CreateRunRequest

from shared.protocol.ids import project_id
from tests.helpers import unique
from tests.wire import raw
from tests.workflows import chain


def _ports() -> Any:
    from shared.wiring import get_ports

    return get_ports()


def _wait(client: Any, run_id: str, timeout: float) -> Any:
    """Poll once a second (a 10,000-node run is long; a tight poll would only load the local stack)."""
    deadline = time.monotonic() + timeout
    while True:
        snap = client.runs_get(run_id)
        if snap.status in ("completed", "failed", "cancelled"):
            return snap
        assert time.monotonic() < deadline, f"run still {snap.status} after {timeout}s"
        time.sleep(1.0)


def _run_item(host: Any, run_id: str) -> dict[str, Any]:
    from shared.settings import get_settings

    got = host.aws.client("dynamodb").get_item(TableName=get_settings().runs_table,
                                                Key={"pk": {"S": run_id}, "sk": {"S": "RUN"}})
    item: dict[str, Any] = got["Item"]
    return item


def _item_bytes(item: dict[str, Any]) -> int:
    return len(json.dumps(item, separators=(",", ":")))


def test_the_local_stack_runs_at_pythons_default_recursion_limit(host):
    # The JSONata library moto's Step Functions imports raises the limit to 10,000; Lambda runs at the default, so
    # local mode restores it (a recursive walk that fails deployed must fail here too).
    assert sys.getrecursionlimit() <= 1000


def test_a_10000_node_chain_registers_runs_and_completes(host):
    from shared.services.workflows import register_workflow

    wid = unique("chain10k")
    doc = chain(wid, 10_000)
    # Given a 10,000-node chain: over the 1 MB request-body limit, so it is registered on the operator path
    assert len(json.dumps(doc)) > 1_000_000
    assert raw(host.base_url, "POST", "/host/openwop-serverless/workflows", doc, key=host.key_a).status == 413
    assert register_workflow(_ports(), host.tenant_a, doc) == wid
    # When it runs, at Python's default recursion limit
    assert sys.getrecursionlimit() <= 1000
    client = host.client(host.key_a)
    run_id = client.runs_create(CreateRunRequest(workflowId=wid)).runId
    snap = _wait(client, run_id, 600)
    # Then it completes with every node's events, and the run item stays small: no definition, no 10,000-node state
    assert snap.status == "completed", snap
    item = _run_item(host, run_id)
    assert int(item["lastSeq"]["N"]) == 2 * 10_000 + 1
    assert "definition" not in json.loads(item["data"]["S"])
    assert _item_bytes(item) < 8_000, _item_bytes(item)
    assert "$ref" in json.loads(item["state"]["S"])
    # and the snapshot a client reads still carries every node's state
    assert len(snap.nodeStates or {}) == 10_000


def test_an_agent_making_2000_tool_calls_completes_with_a_small_run_item(host, monkeypatch):
    from shared.services.workflows import register_workflow
    from shared.settings import get_settings
    from tests.workflows import scripted_agent

    # Given an agent whose script makes 2,000 tool calls (the run item used to overflow after 642), and a budget
    # that allows them
    calls = 2_000
    wid = register_workflow(_ports(), host.tenant_a, scripted_agent(unique("agent2k")))
    script = {"calls": [{"tool": "conformance.eval:echo", "args": {"i": i}} for i in range(calls)], "answer": "done"}
    monkeypatch.setenv("RUN_TOOL_CALL_BUDGET", str(calls))
    get_settings.cache_clear()
    try:
        client = host.client(host.key_a)
        run_id = client.runs_create(CreateRunRequest(workflowId=wid, inputs={"script": script})).runId
        snap = _wait(client, run_id, 600)
    finally:
        monkeypatch.delenv("RUN_TOOL_CALL_BUDGET")
        get_settings.cache_clear()
    # Then it completes with every call answered, and the item each append rewrote stays small
    assert snap.status == "completed", snap
    tail = client.runs_poll_events(run_id, after_sequence=2 * calls, timeout_seconds=1).events
    assert [e.type for e in tail][-4:] == ["agent.decided", "agent.invocation-completed", "node.completed",
                                            "run.completed"]
    assert len(_ports().tool_calls.list_calls(run_id)) == calls
    item = _run_item(host, run_id)
    assert _item_bytes(item) < 8_000, _item_bytes(item)
    # and the snapshot still reads the run's inputs (kept once, in its creation facts)
    got = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}", key=host.key_a).json
    assert got["variables"]["script"]["answer"] == "done" and len(got["inputs"]["script"]["calls"]) == calls


def test_a_run_longer_than_an_executions_budget_continues_in_a_new_execution(host, monkeypatch):
    from shared.services.workflows import register_workflow
    from shared.settings import get_settings
    from tests.workflows import definition, edge, node, static

    # Given executions that may make only 2 Advance tasks, and a run of four holds longer than 1.5 s (each a Wait)
    holds = [node(f"h{i}", "core.conformance.hold", inputs={"delayMs": static(1600)}) for i in range(4)]
    wid = register_workflow(_ports(), host.tenant_a, definition(
        unique("holds"), holds, [edge(f"h{i - 1}", f"h{i}") for i in range(1, 4)]))
    monkeypatch.setenv("EXECUTION_MAX_TASKS", "2")
    get_settings.cache_clear()
    try:
        client = host.client(host.key_a)
        run_id = client.runs_create(CreateRunRequest(workflowId=wid)).runId
        snap = _wait(client, run_id, 120)
    finally:
        monkeypatch.delenv("EXECUTION_MAX_TASKS")
        get_settings.cache_clear()
    # Then it completes, each hold once, through a chain of executions (continue-as-new), each with a short history
    assert snap.status == "completed", snap
    events = client.runs_poll_events(run_id, timeout_seconds=1).events
    assert [e.nodeId for e in events if e.type == "node.completed"] == ["h0", "h1", "h2", "h3"]
    sfn = host.aws.client("stepfunctions")
    arn = get_settings().run_state_machine_arn
    prefix = run_id.replace("/", "--") + "-run"
    names = sorted(e["name"] for e in sfn.list_executions(stateMachineArn=arn, maxResults=1000)["executions"]
                   if e["name"].startswith(prefix))
    assert len(names) >= 3 and names[0] == prefix and f"{prefix}-g1" in names and f"{prefix}-g2" in names
    for name in names:
        ex_arn = arn.replace(":stateMachine:", ":execution:") + ":" + name
        assert sfn.describe_execution(executionArn=ex_arn)["status"] == "SUCCEEDED"
        tasks = [h for h in sfn.get_execution_history(executionArn=ex_arn, maxResults=1000)["events"]
                 if h["type"] == "TaskScheduled"]
        assert len(tasks) <= 2
    # and the run names its latest execution (what a cancel stops)
    item = _run_item(host, run_id)
    assert item["executionArn"]["S"].endswith(f"{prefix}-g{len(names) - 1}")


def test_discovery_advertises_the_suite_cap_the_host_enforces(host):
    from shared.services.evals import MAX_TASKS_PER_SUITE

    caps = raw(host.base_url, "GET", "/.well-known/openwop", key=host.key_a).json
    assert caps["agents"]["evalSuite"]["maxTasksPerSuite"] == MAX_TASKS_PER_SUITE == 200  # the schema's maxItems


def test_an_eval_of_the_largest_suite_runs_as_a_distributed_map(host):
    from shared.settings import get_settings
    from tests.integration.test_eval_runs import eval_request, golden, put_suite, script

    # Given a suite of 200 tasks (the schema's maximum) x 2 trials
    suite_id = "tests.local.evals." + unique("wide").replace("-", "")
    tasks = [{"taskId": f"t{i}", "input": script(answer=str(i % 2)), "expected": golden("0")} for i in range(200)]
    doc = {"suiteId": suite_id, "version": "1.0.0", "modes": ["golden"], "trials": 2, "tasks": tasks}
    assert put_suite(host, host.key_a, doc).status == 201
    # When it runs
    client = host.client(host.key_a)
    run_id = client.runs_create(eval_request(f"{suite_id}@1.0.0")).runId
    snap = _wait(client, run_id, 600)
    # Then every trial ran and was graded (every even task passes)
    assert snap.status == "completed", snap
    summary = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/eval-summary", key=host.key_a).json
    assert summary["taskCount"] == 200 and summary["passedCount"] == 100
    # through a Distributed Map: the parent execution's history holds no iteration, its map run all 400
    sfn = host.aws.client("stepfunctions")
    arn = _run_item(host, run_id)["executionArn"]["S"]
    history = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    assert not any(h["type"].startswith("MapIteration") for h in history)
    assert len(history) < 100
    runs = sfn.list_map_runs(executionArn=arn)["mapRuns"]
    assert len(runs) == 1
    counts = sfn.describe_map_run(mapRunArn=runs[0]["mapRunArn"])["itemCounts"]
    assert counts["succeeded"] == counts["total"] == 400
    assert get_settings().eval_max_concurrency == sfn.describe_map_run(mapRunArn=runs[0]["mapRunArn"])["maxConcurrency"]
