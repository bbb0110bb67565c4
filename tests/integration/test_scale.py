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


def _run_item(host: Any, run_id: str, sk: str = "RUN") -> dict[str, Any]:
    """The run item (``RUN``), or another of the run's items (``RUN#FACTS``, ``RUN#STATE``)."""
    from shared.settings import get_settings

    got = host.aws.client("dynamodb").get_item(
        TableName=get_settings().runs_table, Key={"pk": {"S": run_id}, "sk": {"S": sk}}
    )
    item: dict[str, Any] = got["Item"]
    return item


def _item_bytes(item: dict[str, Any]) -> int:
    return len(json.dumps(item, separators=(",", ":")))


def test_the_local_stack_runs_at_pythons_default_recursion_limit(host):
    # The JSONata library moto's Step Functions imports raises the limit to 10,000; Lambda runs at the default, so
    # local mode restores it (a recursive walk that fails deployed must fail here too).
    assert sys.getrecursionlimit() <= 1000


def test_a_10000_node_chain_registers_runs_and_completes(host):
    wid = unique("chain10k")
    doc = chain(wid, 10_000)
    # Given a 10,000-node chain (1.9 MB: registered through the API, stored compressed)
    assert 1_000_000 < len(json.dumps(doc)) < 2_500_000
    assert raw(host.base_url, "POST", "/host/openwop-serverless/workflows", doc, key=host.key_a).status == 201
    # When it runs, at Python's default recursion limit
    assert sys.getrecursionlimit() <= 1000
    client = host.client(host.key_a)
    run_id = client.runs_create(CreateRunRequest(workflowId=wid)).runId
    snap = _wait(client, run_id, 600)
    # Then it completes with every node's events, and the run item stays small: no definition, no 10,000-node state
    assert snap.status == "completed", snap
    item = _run_item(host, run_id)
    assert int(item["lastSeq"]["N"]) == 2 * 10_000 + 1
    assert "definition" not in json.loads(_run_item(host, run_id, "RUN#FACTS")["data"]["S"])
    assert _item_bytes(item) < 1_000, _item_bytes(item)  # no facts, no state (their own items): issue 27
    state_item = _run_item(host, run_id, "RUN#STATE")
    assert "$ref" in json.loads(state_item["state"]["S"]) and _item_bytes(state_item) < 8_000
    # and the snapshot a client reads still carries every node's state
    assert len(snap.nodeStates or {}) == 10_000
    # and the large state's S3 snapshots add up to less than the log itself (each is paid for by as many bytes of
    # events appended after the one before), the last one the run's end
    from shared.settings import get_settings

    listed = host.aws.client("s3").list_objects_v2(
        Bucket=get_settings().fixtures_bucket, Prefix=f"runs/{run_id}/state/"
    )["Contents"]
    log = sum(len(json.dumps(e, separators=(",", ":"))) for e in _ports().events.read_events(run_id))
    assert 1 <= len(listed) and sum(o["Size"] for o in listed) < log, (len(listed), log)
    assert json.loads(state_item["state"]["S"])["seq"] == int(item["lastSeq"]["N"])


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
    assert [e.type for e in tail][-4:] == [
        "agent.decided",
        "agent.invocation-completed",
        "node.completed",
        "run.completed",
    ]
    assert len(_ports().tool_calls.list_calls(run_id)) == calls
    item = _run_item(host, run_id)
    assert _item_bytes(item) < 1_000, _item_bytes(item)
    assert _item_bytes(_run_item(host, run_id, "RUN#STATE")) < 8_000
    # and the snapshot still reads the run's inputs (kept once, in its creation facts)
    got = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}", key=host.key_a).json
    assert got["variables"]["script"]["answer"] == "done" and len(got["inputs"]["script"]["calls"]) == calls


def test_a_run_longer_than_an_executions_budget_continues_in_a_new_execution(host, monkeypatch):
    from shared.services.workflows import register_workflow
    from shared.settings import get_settings
    from tests.workflows import definition, edge, node, static

    # Given executions that may make only 2 Advance tasks, and a run of four holds longer than 1.5 s (each a Wait)
    holds = [node(f"h{i}", "core.conformance.hold", inputs={"delayMs": static(1600)}) for i in range(4)]
    wid = register_workflow(
        _ports(), host.tenant_a, definition(unique("holds"), holds, [edge(f"h{i - 1}", f"h{i}") for i in range(1, 4)])
    )
    monkeypatch.setenv("EXECUTION_MAX_TASKS", "2")
    get_settings.cache_clear()
    try:
        client = host.client(host.key_a)
        run_id = client.runs_create(CreateRunRequest(workflowId=wid)).runId
        snap = _wait(client, run_id, 120)
    finally:
        monkeypatch.delenv("EXECUTION_MAX_TASKS")
        get_settings.cache_clear()
    # Then it completes, each hold once, through a chain of executions (continue-as-new), each with a short history:
    # its first, one task, on the run machine, which handed its first hold to the hold machine (decision 0191), and
    # there one after another every 2 tasks
    assert snap.status == "completed", snap
    events = client.runs_poll_events(run_id, timeout_seconds=1).events
    assert [e.nodeId for e in events if e.type == "node.completed"] == ["h0", "h1", "h2", "h3"]
    sfn = host.aws.client("stepfunctions")
    arn = get_settings().state_machine_arn("run_hold")
    prefix = run_id.replace("/", "--") + "-run"
    first = get_settings().state_machine_arn("run").replace(":stateMachine:", ":execution:") + ":" + prefix
    assert sfn.describe_execution(executionArn=first)["status"] == "SUCCEEDED"
    names = sorted(
        (
            e["name"]
            for e in sfn.list_executions(stateMachineArn=arn, maxResults=1000)["executions"]
            if e["name"].startswith(prefix)
        ),
        key=lambda name: int(name.rsplit("-g", 1)[1]),
    )
    assert len(names) >= 2 and names[0] == f"{prefix}-g1" and f"{prefix}-g2" in names
    for name in names:
        ex_arn = arn.replace(":stateMachine:", ":execution:") + ":" + name
        assert sfn.describe_execution(executionArn=ex_arn)["status"] == "SUCCEEDED"
        tasks = [
            h
            for h in sfn.get_execution_history(executionArn=ex_arn, maxResults=1000)["events"]
            if h["type"] == "TaskScheduled"
        ]
        assert len(tasks) <= 2
    # and the run names its latest execution (what a cancel stops)
    item = _run_item(host, run_id)
    assert item["executionArn"]["S"] == arn.replace(":stateMachine:", ":execution:") + ":" + names[-1]


def test_a_continuation_starts_on_the_machine_its_task_names_without_one_in_its_environment(host, monkeypatch):
    from shared.services.workflows import register_workflow
    from shared.settings import get_settings
    from shared.wiring import get_ports
    from tests.workflows import definition, edge, node, static

    # Given executions that may make only 2 Advance tasks, and a run of three holds (each a Wait)
    holds = [node(f"h{i}", "core.conformance.hold", inputs={"delayMs": static(1600)}) for i in range(3)]
    wid = register_workflow(
        _ports(), host.tenant_a, definition(unique("renew"), holds, [edge(f"h{i - 1}", f"h{i}") for i in range(1, 3)])
    )
    arn = get_settings().state_machine_arn("run_hold")
    monkeypatch.setenv("EXECUTION_MAX_TASKS", "2")
    get_settings.cache_clear()
    client = host.client(host.key_a)
    try:
        run_id = client.runs_create(CreateRunRequest(workflowId=wid)).runId
        # When, once it has started, the run tasks' environment names no run machine (as deployed: the machine refers
        # to the task function, so the function's environment cannot refer back to it)
        monkeypatch.setenv("RUN_STATE_MACHINE_ARN", "")
        monkeypatch.setenv("RUN_HOLD_STATE_MACHINE_ARN", "")
        get_settings.cache_clear()
        assert get_settings().state_machine_arn("run") == "" and get_ports().settings.state_machine_arn("run") == ""
        assert get_ports().settings.state_machine_arn("run_hold") == ""
        snap = _wait(client, run_id, 120)
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    # Then it still completes, held on the machine its chained task was told (decision 0191) and continued on the
    # machine its task named ($$.StateMachine.Id)
    assert snap.status == "completed", snap
    prefix = run_id.replace("/", "--") + "-run"
    names = [
        e["name"]
        for e in host.aws.client("stepfunctions").list_executions(stateMachineArn=arn, maxResults=1000)["executions"]
        if e["name"].startswith(prefix)
    ]
    assert f"{prefix}-g1" in names and f"{prefix}-g2" in names  # held at g1, continued at g2


def test_discovery_advertises_the_suite_cap_the_host_enforces(host):
    from shared.services.evals import MAX_TASKS_PER_SUITE
    from tests.integration.test_eval_runs import golden, put_suite

    caps = raw(host.base_url, "GET", "/.well-known/openwop", key=host.key_a).json
    assert caps["agents"]["evalSuite"]["maxTasksPerSuite"] == MAX_TASKS_PER_SUITE == 10_000
    # and the suite schema refuses one task more (compact tasks: the body stays under maxRequestBodyBytes)
    tasks = [{"taskId": f"t{i}", "input": {}, "expected": golden("x")} for i in range(10_001)]
    doc = {
        "suiteId": "tests.local.evals." + unique("over").replace("-", ""),
        "version": "1.0.0",
        "modes": ["golden"],
        "tasks": tasks,
    }
    got = put_suite(host, host.key_a, doc)
    assert got.status == 400 and got.json["error"] == "validation_error"
    assert ("/tasks", "maxItems") in [(e["pointer"], e["keyword"]) for e in got.json["details"]["errors"]]


def _eval_history(host: Any, run_id: str) -> list[dict[str, Any]]:
    sfn = host.aws.client("stepfunctions")
    arn = _run_item(host, run_id)["executionArn"]["S"]
    events: list[dict[str, Any]] = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    return events


def test_a_large_eval_runs_as_a_distributed_map_and_finishes_in_pages(host, monkeypatch):
    from shared import keys
    from shared.settings import get_settings
    from tests.integration.test_eval_runs import eval_request, golden, put_suite, script

    # Given a suite of 560 tasks with 128-character ids and padded inputs (its summary is over the run item's
    # inline limit, its plan over the plan item's), one task in seven run twice, and Finish pages of 200 trials
    pad = "p" * 300
    tasks = [
        {
            "taskId": f"{i:04d}-" + "x" * 123,
            "input": {**script(answer=str(i % 2)), "note": pad},
            "expected": golden("0"),
            **({"trials": 2} if i % 7 == 0 else {}),
        }
        for i in range(560)
    ]
    trials = sum(2 if i % 7 == 0 else 1 for i in range(560))
    suite_id = "tests.local.evals." + unique("wide").replace("-", "")
    doc = {"suiteId": suite_id, "version": "1.0.0", "modes": ["golden", "regression"], "tasks": tasks}
    assert put_suite(host, host.key_a, doc).status == 201
    monkeypatch.setenv("EVAL_FINISH_PAGE_TRIALS", "200")
    get_settings.cache_clear()
    try:
        client = host.client(host.key_a)
        run_id = client.runs_create(eval_request(f"{suite_id}@1.0.0")).runId
        snap = _wait(client, run_id, 600)
        assert snap.status == "completed", snap
        # When a regression eval names it as its baseline
        again = client.runs_create(
            eval_request(f"{suite_id}@1.0.0", evalModes=["golden", "regression"], baselineRunId=run_id)
        ).runId
        snap2 = _wait(client, again, 600)
        assert snap2.status == "completed", snap2
    finally:
        monkeypatch.delenv("EVAL_FINISH_PAGE_TRIALS")
        get_settings.cache_clear()
    # Then every trial ran and was graded (every even task passes), the summary read back whole from S3
    run_pid = project_id(run_id)
    summary = raw(host.base_url, "GET", f"/runs/{run_pid}/eval-summary", key=host.key_a).json
    assert summary["taskCount"] == 560 and summary["passedCount"] == 280
    assert [t["taskId"] for t in summary["tasks"]] == [t["taskId"] for t in tasks]
    assert _run_item(host, run_id)["summary"]["S"] == json.dumps(
        {"$ref": keys.eval_summary_key(run_id)}, separators=(",", ":")
    )
    # the log holds every trial's invocation and one eval.scored per task, in suite order, then the two closers
    seen: list[Any] = []
    while not seen or seen[-1].type != "run.completed":
        got = client.runs_poll_events(run_id, after_sequence=seen[-1].sequence if seen else None, timeout_seconds=1)
        assert got.events
        seen.extend(got.events)
    assert [e.sequence for e in seen] == list(range(len(seen)))
    scored = [e.payload["taskId"] for e in seen if e.type == "eval.scored"]
    assert scored == [t["taskId"] for t in tasks]
    assert sum(1 for e in seen if e.type == "agent.invocation-started") == trials
    assert [e.type for e in seen[-2:]] == ["eval.completed", "run.completed"]
    # through a Distributed Map (no iteration in the parent's history) and a Finish loop of four pages
    history = _eval_history(host, run_id)
    assert not any(h["type"].startswith("MapIteration") for h in history)
    finishes = [
        h for h in history if h["type"] == "TaskStateEntered" and h["stateEnteredEventDetails"]["name"] == "Finish"
    ]
    assert len(finishes) == 4  # whole tasks up to 200 trials: 175 + 175 + 175 + 35 tasks
    sfn = host.aws.client("stepfunctions")
    runs = sfn.list_map_runs(executionArn=_run_item(host, run_id)["executionArn"]["S"])["mapRuns"]
    counts = sfn.describe_map_run(mapRunArn=runs[0]["mapRunArn"])["itemCounts"]
    assert counts["succeeded"] == counts["total"] == trials
    assert get_settings().eval_max_concurrency == sfn.describe_map_run(mapRunArn=runs[0]["mapRunArn"])["maxConcurrency"]
    # the Map's result, the pages' rows and the plan were written under the run (erasure reaches them)
    listed = [
        o["Key"]
        for o in host.aws.client("s3").list_objects_v2(
            Bucket=get_settings().fixtures_bucket, Prefix=keys.run_prefix(run_id)
        )["Contents"]
    ]
    assert any(k.startswith(f"{keys.run_prefix(run_id)}eval-map/") for k in listed)
    assert sorted(k for k in listed if "/eval-rows/" in k) == [
        f"{keys.run_prefix(run_id)}eval-rows/{n:05d}.json" for n in (0, 175, 350)
    ]
    assert f"{keys.run_prefix(run_id)}eval-plan.json" in listed
    # and the regression eval compared against the baseline read from S3: every task unchanged
    regression = raw(host.base_url, "GET", f"/runs/{project_id(again)}/eval-summary", key=host.key_a).json
    assert regression["regression"]["baselineRunId"] == run_id
    assert regression["regression"]["verdict"] == "unchanged" and regression["regression"]["scoreDelta"] == 0
