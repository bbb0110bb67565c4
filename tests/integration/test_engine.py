"""The run engine end to end: fixtures, agents and tools, the as-executed record, crash safety, long runs."""

from __future__ import annotations

import dataclasses
import json

import pytest
from openwop_client.types import CreateRunRequest

from tests.helpers import unique
from tests.wire import all_events, types_of, wait_terminal
from tests.workflows import definition, edge, node, register_noop_loop, static, variable


def _ports():
    from shared.wiring import get_ports

    return get_ports()


def _register(tenant: str, doc: dict) -> str:
    from shared.services.workflows import register_workflow

    return register_workflow(_ports(), tenant, doc)


def agent_workflow(wid: str, agent_id: str = "conformance-eval-agent") -> dict:
    return definition(
        wid,
        [node("agent", "core.agent", config={"agentId": agent_id}, inputs={"input": variable("script")})],
        variables=[{"name": "script", "type": "object", "required": True}],
        settings={"timeout": 60000},
    )


def test_noop_fixture_completes(host):
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId="conformance-noop"))
    assert wait_terminal(client, run.runId).status == "completed"
    assert types_of(all_events(client, run.runId)) == [
        ("run.started", None),
        ("node.started", "noop"),
        ("node.completed", "noop"),
        ("run.completed", None),
    ]


# The log of the side-effect fixture's run: a hold, then an effect (the fixture's, in ``conformance-replay-side-effect``)
HOLD_THEN_EFFECT = [
    ("run.started", None),
    ("node.started", "wait"),
    ("node.completed", "wait"),
    ("node.started", "effect"),
    ("node.completed", "effect"),
    ("run.completed", None),
]


def test_side_effect_fixture_runs_hold_then_effect(host):
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId="conformance-replay-side-effect", inputs={"delayMs": 200}))
    assert wait_terminal(client, run.runId).status == "completed"
    events = all_events(client, run.runId)
    assert types_of(events) == HOLD_THEN_EFFECT
    # hold outputs equal its inputs
    assert events[2].payload["outputs"] == {"delayMs": 200}
    assert events[1].payload == {"nodeId": "wait", "typeId": "core.conformance.hold", "attempt": 0}
    # one effect-ledger row for the one execution
    rows = _ports().host.query("LEDGER#tenant-a", run.runId)
    assert [r[1]["ordinal"] for r in rows] == [1]


def test_ordinal_loop_runs_effect_twice(host):
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId="conformance-replay-ordinal-loop", inputs={"delayMs": 100}))
    assert wait_terminal(client, run.runId).status == "completed"
    t = types_of(all_events(client, run.runId))
    assert t.count(("node.completed", "effect")) == 2 and t.count(("node.completed", "wait")) == 2
    assert t[-1] == ("run.completed", None)
    assert len(_ports().host.query("LEDGER#tenant-a", run.runId)) == 2


def test_agent_tool_calls_are_recorded_as_executed(host):
    # Given an agent workflow whose script calls the counter and echo
    wid = _register("tenant-a", agent_workflow(unique("agent-wf")))
    key = unique("k")
    script = {
        "calls": [
            {"tool": "conformance.eval:counter", "args": {"op": "inc", "key": key}},
            {"tool": "conformance.eval:echo", "args": {"nested": {"b": 1, "a": [1, 2]}}},
            {"tool": "conformance.eval:counter", "args": {"op": "read", "key": key}},
            {"tool": "conformance.eval:fail", "args": {}},
        ],
        "answer": "done",
    }
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=wid, inputs={"script": script}))
    # When it runs
    assert wait_terminal(client, run.runId).status == "completed"
    events = all_events(client, run.runId)
    called = [e.payload for e in events if e.type == "agent.tool-called"]
    returned = [e.payload for e in events if e.type == "agent.tool-returned"]
    # Then events carry inputs and outcomes, and the record holds exactly the same
    assert [c["inputs"] for c in called] == [s["args"] for s in script["calls"]]
    assert returned[0]["outcome"] == {"key": key, "count": 1} and returned[0]["status"] == "ok"
    assert returned[2]["outcome"] == {"key": key, "count": 1}
    assert returned[3]["status"] == "error" and returned[3]["error"]["code"] == "external_call_failed"
    records = _ports().tool_calls.list_calls(run.runId)
    assert [r.args for r in records] == [s["args"] for s in script["calls"]]
    assert [r.status for r in records] == ["ok", "ok", "ok", "error"]
    assert [r.result for r in records[:3]] == [returned[0]["outcome"], returned[1]["outcome"], returned[2]["outcome"]]
    assert {r.source for r in records} == {"live"} and {r.agent_id for r in records} == {"conformance-eval-agent"}
    assert all(not r.delegate for r in records)
    assert [r.call_id for r in records] == [c["callId"] for c in called]
    decided = [e.payload for e in events if e.type == "agent.decided"]
    assert decided == [{"agentId": "conformance-eval-agent", "decision": "done"}]
    inv = [e for e in events if e.type.startswith("agent.invocation")]
    assert [e.type for e in inv] == ["agent.invocation-started", "agent.invocation-completed"]
    assert inv[0].payload["source"] == "workflow-node"


def test_content_free_agent_keeps_the_full_record(host):
    wid = _register("tenant-a", agent_workflow(unique("cf-wf"), "conformance-eval-agent-content-free"))
    key = unique("k")
    script = {"calls": [{"tool": "conformance.eval:counter", "args": {"op": "inc", "key": key}}], "answer": 1}
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=wid, inputs={"script": script}))
    wait_terminal(client, run.runId)
    events = all_events(client, run.runId)
    called = next(e.payload for e in events if e.type == "agent.tool-called")
    returned = next(e.payload for e in events if e.type == "agent.tool-returned")
    assert "inputs" not in called and called["argsHash"].startswith("sha256:")
    assert "outcome" not in returned and returned["status"] == "ok"
    rec = _ports().tool_calls.list_calls(run.runId)[0]
    assert rec.args == {"op": "inc", "key": key} and rec.result == {"key": key, "count": 1}


def test_counter_is_per_tenant(host):
    wid = unique("ctr-wf")
    for t in ("tenant-a", "tenant-b"):
        _register(t, agent_workflow(wid))
    key = unique("shared-key")
    inc = {"calls": [{"tool": "conformance.eval:counter", "args": {"op": "inc", "key": key}}], "answer": 0}
    a = host.client(host.key_a)
    for _ in range(2):
        wait_terminal(a, a.runs_create(CreateRunRequest(workflowId=wid, inputs={"script": inc})).runId)
    b = host.client(host.key_b)
    run = b.runs_create(CreateRunRequest(workflowId=wid, inputs={"script": inc}))
    wait_terminal(b, run.runId)
    out = next(e.payload for e in all_events(b, run.runId) if e.type == "agent.tool-returned")
    assert out["outcome"] == {"key": key, "count": 1}
    assert _ports().host.counter_read("COUNTER#tenant-a", key) == 2


def test_disallowed_tool_is_forbidden_and_never_runs(host):
    from shared.services.auth import key_hash  # noqa: F401 - ensure services import cleanly

    agent_id = unique("narrow-agent")
    _ports().host.put_item(
        "AGENT#tenant-a",
        agent_id,
        {"agentId": agent_id, "kind": "scripted", "toolAllowlist": ["conformance.eval:echo"]},
    )
    wid = _register("tenant-a", agent_workflow(unique("narrow-wf"), agent_id))
    key = unique("k")
    script = {"calls": [{"tool": "conformance.eval:counter", "args": {"op": "inc", "key": key}}], "answer": 0}
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=wid, inputs={"script": script}))
    wait_terminal(client, run.runId)
    out = next(e.payload for e in all_events(client, run.runId) if e.type == "agent.tool-returned")
    assert out["status"] == "forbidden" and "durationMs" not in out
    assert _ports().host.counter_read("COUNTER#tenant-a", key) == 0
    assert _ports().tool_calls.list_calls(run.runId)[0].status == "forbidden"


def test_tool_call_budget_gives_rate_limited(host, monkeypatch):
    from shared.settings import get_settings

    wid = _register("tenant-a", agent_workflow(unique("budget-wf")))
    script = {"calls": [{"tool": "conformance.eval:echo", "args": {"i": i}} for i in range(3)], "answer": 0}
    monkeypatch.setenv("RUN_TOOL_CALL_BUDGET", "2")
    get_settings.cache_clear()
    try:
        client = host.client(host.key_a)
        run = client.runs_create(CreateRunRequest(workflowId=wid, inputs={"script": script}))
        wait_terminal(client, run.runId)
    finally:
        monkeypatch.delenv("RUN_TOOL_CALL_BUDGET")
        get_settings.cache_clear()
    statuses = [e.payload["status"] for e in all_events(client, run.runId) if e.type == "agent.tool-returned"]
    assert statuses == ["ok", "ok", "rate_limited"]


def test_cycle_without_bound_is_refused_before_anything_runs(host):
    from shared.errors import ValidationError

    doc = definition(
        unique("cyc"),
        [node("a", "core.noop"), node("b", "core.noop"), node("c", "core.noop")],
        [edge("a", "b"), edge("b", "c"), edge("c", "b")],
    )
    with pytest.raises(ValidationError):
        _register("tenant-a", doc)
    assert _ports().host.get_item("WORKFLOW#tenant-a", doc["id"]) is None


def test_failed_node_fails_the_run_with_its_error(host):
    doc = definition(
        unique("tool-wf"),
        [node("t", "core.tool", config={"tool": "conformance.eval:fail"}), node("after", "core.noop")],
        [edge("t", "after")],
    )
    _register("tenant-a", doc)
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=doc["id"]))
    snap = wait_terminal(client, run.runId)
    assert snap.status == "failed" and snap.error.code == "external_call_failed"
    t = types_of(all_events(client, run.runId))
    assert ("node.failed", "t") in t and ("node.started", "after") not in t and t[-1] == ("run.failed", None)


def test_http_node_refuses_hosts_off_the_allowlist(host):
    doc = definition(unique("http-wf"), [node("h", "core.http", config={"url": "https://example.com/x"})])
    _register("tenant-a", doc)
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=doc["id"]))
    snap = wait_terminal(client, run.runId)
    assert snap.status == "failed"
    failed = next(e for e in all_events(client, run.runId) if e.type == "node.failed")
    assert "allowlist" in failed.payload["error"]["message"]


def test_a_crash_after_the_write_is_retried_without_duplicates(host, monkeypatch):
    # Given an append that succeeds and then the task dies (as if the Lambda crashed after the write)
    from shared.storage.events import DynamoEventStore

    wid = _register("tenant-a", agent_workflow(unique("crash-wf")))
    key = unique("k")
    script = {"calls": [{"tool": "conformance.eval:counter", "args": {"op": "inc", "key": key}}], "answer": "x"}
    real = DynamoEventStore.append_events
    state = {"crashed": 0}

    def crash_once(self, run_id, *a, **kw):
        out = real(self, run_id, *a, **kw)
        if state["crashed"] == 0 and run_id.startswith("tenant-a/") and kw.get("require_status"):
            state["crashed"] += 1
            raise RuntimeError("task killed after its write")
        return out

    monkeypatch.setattr(DynamoEventStore, "append_events", crash_once)
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=wid, inputs={"script": script}))
    # When Step Functions retries the task
    snap = wait_terminal(client, run.runId, timeout=30)
    # Then the run completes with every sequence exactly once and the effect fired once
    events = all_events(client, run.runId)
    assert state["crashed"] == 1 and snap.status == "completed", (snap, [e.type for e in events])
    assert [e.sequence for e in events] == list(range(len(events)))
    assert [e.type for e in events].count("agent.tool-called") == 1
    assert _ports().host.counter_read("COUNTER#tenant-a", key) == 1


@pytest.mark.slow
def test_a_10000_event_run_completes_with_bounded_history(host):
    doc = definition(
        unique("loop-wf"),
        [node("s", "core.noop"), node("a", "core.noop"), node("b", "core.noop")],
        [edge("s", "a", eid="sa"), edge("a", "b", eid="ab"), edge("b", "a", eid="ba")],
        settings={"maxLoopbackIterations": 2500, "timeout": 0},
    )
    _register("tenant-a", doc)
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=doc["id"]))
    snap = wait_terminal(client, run.runId, timeout=240)
    assert snap.status == "completed"
    rec = _ports().runs.get_run(run.runId)
    assert rec.last_seq + 1 == 4 + 2500 * 4
    sfn = host.aws.client("stepfunctions")
    history = sfn.get_execution_history(executionArn=rec.execution_arn, maxResults=1000)["events"]
    # each task advances up to 4,950 events: a handful of loop iterations, far inside 25,000
    assert len(history) < 100, len(history)
    first = _ports().events.read_events(run.runId, -1, limit=3)
    assert json.dumps(first[0]["payload"]["workflowId"]) == json.dumps(doc["id"])


def test_http_node_calls_an_allowlisted_host_once_and_records_the_outcome(host, monkeypatch):
    # Given a real HTTP server on loopback that counts requests, and the host allowlisting it
    import http.server
    import threading

    from shared.settings import get_settings

    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server API
            hits.append(self.rfile.read(int(self.headers["Content-Length"])).decode())
            body = json.dumps({"ok": True}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    monkeypatch.setenv("HTTP_ALLOWLIST", f"127.0.0.1:{port}")
    get_settings.cache_clear()
    try:
        doc = definition(
            unique("http-ok"),
            [
                node(
                    "h",
                    "core.http",
                    config={"url": f"http://127.0.0.1:{port}/hook", "method": "POST"},
                    inputs={"body": static({"n": 1})},
                )
            ],
        )
        _register("tenant-a", doc)
        client = host.client(host.key_a)
        run = client.runs_create(CreateRunRequest(workflowId=doc["id"]))
        assert wait_terminal(client, run.runId).status == "completed"
        done = next(e for e in all_events(client, run.runId) if e.type == "node.completed")
        assert done.payload["outputs"] == {"status": 200, "body": {"ok": True}}
        assert hits == ['{"n": 1}']
        # a replay fork serves the recorded outcome and never calls the server again
        from openwop_client.types import ForkRunRequest

        fork = client.runs_fork(run.runId, ForkRunRequest(fromSeq=0, mode="replay"))
        assert wait_terminal(client, fork.runId).status == "completed"
        assert len(hits) == 1
    finally:
        server.shutdown()
        monkeypatch.delenv("HTTP_ALLOWLIST")
        get_settings.cache_clear()


def test_a_tasks_middle_pages_are_plain_puts_and_its_last_closes_the_tail(host):
    # Given a run of a loop of no-op nodes long enough for one task to append seven pages
    from shared.storage import schema
    from tests.helpers import naming, requests_sent

    ports = _ports()
    wid = register_noop_loop("tenant-a", "wf-pages", 160)
    client = host.client(host.key_a)
    table = ports.settings.events_table
    with requests_sent(ports.events._c, "PutItem", table) as puts:
        run = client.runs_create(CreateRunRequest(workflowId=wid))
        assert wait_terminal(client, run.runId).status == "completed"
    # Then its log is whole and in order, its middle pages went as plain conditional puts (no head written), and
    # the run item's head is the log's end with the tail closed
    events = all_events(client, run.runId)
    assert [e.sequence for e in events] == list(range(len(events))) and len(events) > 6 * 99
    mine = naming(puts, run.runId)
    assert len(mine) >= 4 and {p["ConditionExpression"] for p in mine} == {"attribute_not_exists(seq)"}
    head = ports.runs._c.get_item(
        TableName=ports.settings.runs_table, Key={"pk": {"S": run.runId}, "sk": {"S": schema.RUN_SK}}
    )["Item"]
    assert int(head["lastSeq"]["N"]) == len(events) - 1 and schema.OPEN_TAIL not in head


def test_a_run_stamped_before_plain_appends_is_appended_in_transactions_only(host):
    # Given a run of that loop whose creation facts carry no ``appends`` stamp (a build from before decision 0170)
    from shared.engine import kernel
    from shared.engine.runkinds import RUN_KINDS
    from shared.storage import schema
    from tests.helpers import naming, requests_sent, stored_run

    ports = _ports()
    wid = register_noop_loop("tenant-a", "wf-pages-old", 160)
    data = {"workflowId": wid, "build": {"buildId": "old"}}
    rec = stored_run(ports, "r-old-appends", "pending", tenant="tenant-a", data=data)
    # When this build's Advance tasks run it to its end
    with requests_sent(ports.events._c, "PutItem", ports.settings.events_table) as puts:
        for _ in range(10):
            if kernel.advance(ports, rec.run_id, RUN_KINDS)["next"] == "done":
                break
    # Then every page rode a transaction with the head (none was put alone) and the log is whole
    events = ports.events.read_events(rec.run_id)
    assert naming(puts, rec.run_id) == [] and len(events) > 6 * 99
    assert [e["sequence"] for e in events] == list(range(len(events))) and events[-1]["type"] == "run.completed"
    head = ports.runs._c.get_item(
        TableName=ports.settings.runs_table, Key={"pk": {"S": rec.run_id}, "sk": {"S": schema.RUN_SK}}
    )["Item"]
    assert int(head["lastSeq"]["N"]) == len(events) - 1 and schema.OPEN_TAIL not in head


@pytest.mark.parametrize("first_task", [99, 100, 101, 102])
def test_a_task_whose_first_page_ends_the_run_leaves_the_tail_closed(host, first_task):
    # Given a 200-event run whose first task stops after about ``first_task`` events, so that for one of these the
    # second task's first page of 99 events holds the run's end (the run is no longer writable after it: nothing
    # could close a tail that page opened)
    from shared.engine.version import APPENDS
    from shared.engine.workflowrun import advance
    from shared.storage import schema
    from tests.helpers import naming, requests_sent, stored_run

    ports = _ports()
    wid = register_noop_loop("tenant-a", "wf-pages-end", 49)
    data = {"workflowId": wid, "build": {"buildId": "now", "appends": APPENDS}}
    rec = stored_run(ports, "r-pages-end", "pending", tenant="tenant-a", data=data)
    # When its tasks run it to its end
    with requests_sent(ports.events._c, "TransactWriteItems") as txs:
        for max_events in (first_task, 1000, 1000):
            if advance(ports, ports.runs.get_run(rec.run_id), max_events=max_events)["next"] == "done":
                break
    # Then it completed with the log whole, its head at the end and its tail closed
    events = ports.events.read_events(rec.run_id)
    assert [e["sequence"] for e in events] == list(range(200)) and events[-1]["type"] == "run.completed"
    head = ports.runs._c.get_item(
        TableName=ports.settings.runs_table, Key={"pk": {"S": rec.run_id}, "sk": {"S": schema.RUN_SK}}
    )["Item"]
    assert head["lastSeq"] == {"N": "199"} and schema.OPEN_TAIL not in head, head.get(schema.OPEN_TAIL)
    # and the page that ended it stored its final state with it: no transaction after it (one refused, as the run
    # was no longer writable, was the deferred state's before)
    stored = ports.runs.get_run(rec.run_id)
    assert stored is not None and stored.state is not None
    assert (stored.state["seq"], stored.state["status"]) == (199, "completed")
    last = naming(txs, rec.run_id)[-1]["TransactItems"]
    assert [next(iter(i.values()))["TableName"] for i in last if "Put" in i] == [ports.settings.events_table]


def test_a_cancel_stops_a_task_appending_plain_pages_and_ends_the_log(host):
    # Given a run whose one task appends about 4,800 events, most of them in plain pages, already past its first pages
    from tests.helpers import eventually

    ports = _ports()
    wid = register_noop_loop("tenant-a", "wf-pages-cancel", 1200)
    client = host.client(host.key_a)
    run_id = client.runs_create(CreateRunRequest(workflowId=wid)).runId
    eventually(lambda: ports.runs.get_run(run_id).last_seq >= 3 * 99, timeout=30)
    # When it is cancelled
    assert client.runs_cancel(run_id).status == "cancelled"
    # Then the run is cancelled with run.cancelled last, its log whole, and the task stopped well before its end
    snap = wait_terminal(client, run_id)
    events = ports.events.read_events(run_id)
    assert snap.status == "cancelled" and events[-1]["type"] == "run.cancelled"
    assert [e["sequence"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events].count("run.cancelled") == 1 and "run.completed" not in {
        e["type"] for e in events
    }


@pytest.mark.parametrize("page_ms", [150, 0])
def test_a_task_appending_plain_pages_stops_within_ten_pages_of_a_cancel_request_once_a_second_passed(host, page_ms):
    # Given a run whose one task would append about 4,800 events, each plain page taking ``page_ms`` of the clock,
    # and a cancel request (status ``cancelling``, the cancel's own events not yet appended, as when the request is
    # cut there) landing right after the task's second plain page
    from shared.engine.version import APPENDS
    from shared.engine.workflowrun import STATUS_EVERY_MS, STATUS_EVERY_PAGES, advance
    from tests.helpers import naming, requests_sent, stored_run
    from tests.integration.test_quotas import FixedClock

    clock = FixedClock(1_900_000_000_000)
    ports = dataclasses.replace(_ports(), clock=clock)
    wid = register_noop_loop("tenant-a", "wf-pages-stop", 1200)
    data = {"workflowId": wid, "build": {"buildId": "now", "appends": APPENDS}}
    rec = stored_run(ports, f"r-pages-stop-{page_ms}", "pending", tenant="tenant-a", data=data)
    table = ports.settings.events_table
    seen = {"plain": 0, "tail": -1}

    def after_put(params: dict | None = None, **_: object) -> None:
        if (params or {}).get("TableName") != table or "page" not in params.get("Item", {}):  # a plain page's put
            return
        if params["Item"]["runId"]["S"] != rec.run_id:
            return
        seen["plain"] += 1
        clock.ms += page_ms
        if seen["plain"] == 2:
            seen["tail"] = int(params["Item"]["last"]["N"])
            assert ports.runs.update_status(rec.run_id, "cancelling", allowed_from=("running",))

    ports.events._c.meta.events.register("provide-client-params.dynamodb.PutItem", after_put)
    try:
        # When the task goes on
        with requests_sent(ports.runs._c, "GetItem", ports.settings.runs_table) as gets:
            out = advance(ports, ports.runs.get_run(rec.run_id))
    finally:
        ports.events._c.meta.events.unregister("provide-client-params.dynamodb.PutItem", after_put)
    events = ports.events.read_events(rec.run_id)
    reads = [g for g in naming(gets, rec.run_id) if g.get("ProjectionExpression") == "#st"]  # its status reads
    assert out["next"] == "done" and seen["tail"] > 0
    assert [e["sequence"] for e in events] == list(range(len(events)))
    if page_ms * STATUS_EVERY_PAGES >= STATUS_EVERY_MS:
        # Then a task whose ten pages take a second or more read the status at its tenth page, stopped within
        # STATUS_EVERY_PAGES pages of the request, writing nothing after, and left the run to the cancel
        assert seen["tail"] < len(events) <= seen["tail"] + 1 + STATUS_EVERY_PAGES * 99
        assert len(reads) == 1
    else:
        # Then a task whose pages take no time read no status (its pages cost no reads), ran on to its last append,
        # which the run's status refused, and left the run to the cancel
        assert reads == [] and len(events) > 40 * 99
        assert "run.completed" not in {e["type"] for e in events}
    assert ports.runs.get_run(rec.run_id).status == "cancelling"
