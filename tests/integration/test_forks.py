"""Replay and fork: suppression keyed on the execution ordinal, fail-closed, divergence, branch, refusals."""

from __future__ import annotations

import pytest
from openwop_client.types import CreateRunRequest, ForkRunRequest

from tests.helpers import eventually, unique
from tests.integration.test_chained_executions import described, entered, execution_arn
from tests.wire import all_events, raw, types_of, wait_for_events, wait_terminal
from tests.workflows import definition, edge, node, variable


def _ports():
    from shared.wiring import get_ports

    return get_ports()


def _lose(run_id: str, seq: int) -> None:
    """The log of ``run_id`` loses its event ``seq`` (as a purge would): the stored page that holds it is replaced by
    pages of the events before and after it."""
    import json

    from shared.storage.events import pack_page, unpack_page

    ev = _ports().events
    item = ev._c.query(
        TableName=ev._t,
        KeyConditionExpression="runId = :r AND seq <= :s",  # pages are keyed by their first sequence
        ScanIndexForward=False,
        Limit=1,
        ExpressionAttributeValues={":r": {"S": run_id}, ":s": {"N": str(seq)}},
    )["Items"][0]
    first, docs = unpack_page(item)
    ev._c.delete_item(TableName=ev._t, Key={"runId": item["runId"], "seq": item["seq"]})
    for lo, part in ((first, docs[: seq - first]), (seq + 1, docs[seq - first + 1 :])):
        if part:
            page = pack_page(run_id, lo, [json.dumps(d) for d in part], int(item["expiresAt"]["N"]))
            ev._c.put_item(TableName=ev._t, Item=page.item)


def _wire(run_id: str) -> str:
    return run_id.replace("/", "~2F")


_wait_for = wait_for_events


def _ledger(run_id: str) -> list:
    return _ports().host.query("LEDGER#tenant-a", run_id + "#")


def _counter_wf(tenant: str = "tenant-a") -> str:
    from shared.services.workflows import register_workflow

    wid = unique("fork-agent")
    register_workflow(
        _ports(),
        tenant,
        definition(
            wid,
            [
                node(
                    "agent",
                    "core.agent",
                    config={"agentId": "conformance-eval-agent"},
                    inputs={"input": variable("script")},
                )
            ],
            variables=[{"name": "script", "type": "object", "required": True}],
        ),
    )
    return wid


def test_replay_of_a_cancelled_side_effect_run_fails_the_effect_closed(host):
    client = host.client(host.key_a)
    src = client.runs_create(CreateRunRequest(workflowId="conformance-replay-side-effect", inputs={"delayMs": 6000}))
    _wait_for(client, src.runId, lambda ev: ("node.started", "wait") in types_of(ev))
    client.runs_cancel(src.runId)
    assert wait_terminal(client, src.runId).status == "cancelled"
    assert ("node.completed", "effect") not in types_of(all_events(client, src.runId))
    # When the run is forked in replay mode (fromSeq defaulted)
    fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=0, mode="replay"))
    assert fork.sourceRunId == src.runId and fork.mode == "replay" and fork.fromSeq == 0
    assert fork.eventsUrl == f"/runs/{_wire(fork.runId)}/events"
    snap = wait_terminal(client, fork.runId, timeout=30)
    # Then wait re-runs live, effect fails closed and never completes, no effect is performed
    events = all_events(client, fork.runId)
    t = types_of(events)
    assert ("node.completed", "wait") in t
    assert ("node.completed", "effect") not in t
    failed = [e for e in events if e.type == "node.failed" and e.nodeId == "effect"]
    assert len(failed) == 1 and failed[0].payload["error"]["code"] == "replay_source_missing"
    assert snap.status == "failed" and snap.error.code == "replay_source_missing"
    assert _ledger(fork.runId) == [] and _ledger(src.runId) == []
    assert snap.parentRunId == src.runId and snap.owner == client.runs_get(src.runId).owner
    # the hold completing where the source was cancelled is reported as divergence
    div = [e for e in events if e.type == "replay.diverged"]
    assert len(div) == 1 and div[0].payload["sourceRunId"] == src.runId
    assert div[0].payload["divergencePoint"] == "node.completed"


def test_ordinal_loop_serves_execution_one_and_fails_execution_two(host):
    client = host.client(host.key_a)
    src = client.runs_create(CreateRunRequest(workflowId="conformance-replay-ordinal-loop", inputs={"delayMs": 8000}))
    events = _wait_for(client, src.runId, lambda ev: ("node.completed", "effect") in types_of(ev))
    client.runs_cancel(src.runId)
    wait_terminal(client, src.runId)
    events = all_events(client, src.runId)
    t = types_of(events)
    assert t.count(("node.started", "effect")) == 1 and t.count(("node.completed", "effect")) == 1
    start_seq = next(e.sequence for e in events if e.type == "node.started" and e.nodeId == "effect")
    recorded = next(e.payload["outputs"] for e in events if e.type == "node.completed" and e.nodeId == "effect")
    fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=start_seq, mode="replay"))
    assert fork.status == "running"
    wait_terminal(client, fork.runId, timeout=30)
    fe = all_events(client, fork.runId)
    completions = [e for e in fe if e.type == "node.completed" and e.nodeId == "effect"]
    assert len(completions) == 1 and completions[0].payload["outputs"] == recorded
    assert ("node.completed", "wait") in types_of(fe)
    fails = [e for e in fe if e.type == "node.failed" and e.nodeId == "effect"]
    assert [f.payload["error"]["code"] for f in fails] == ["replay_source_missing"]
    assert len(_ledger(src.runId)) == 1 and _ledger(fork.runId) == []


def test_replay_of_a_counter_run_leaves_the_counter_and_branch_moves_it(host):
    client = host.client(host.key_a)
    wid = _counter_wf()
    key = unique("ctr")
    script = {
        "calls": [
            {"tool": "conformance.eval:counter", "args": {"op": "inc", "key": key}},
            {"tool": "conformance.eval:counter", "args": {"op": "read", "key": key}},
        ],
        "answer": "ok",
    }
    src = client.runs_create(CreateRunRequest(workflowId=wid, inputs={"script": script}))
    assert wait_terminal(client, src.runId).status == "completed"
    assert _ports().host.counter_read("COUNTER#tenant-a", key) == 1
    replay = client.runs_fork(src.runId, ForkRunRequest(fromSeq=0, mode="replay"))
    assert wait_terminal(client, replay.runId).status == "completed"
    assert _ports().host.counter_read("COUNTER#tenant-a", key) == 1
    src_out = [e.payload["outcome"] for e in all_events(client, src.runId) if e.type == "agent.tool-returned"]
    rep_events = all_events(client, replay.runId)
    rep_out = [e.payload["outcome"] for e in rep_events if e.type == "agent.tool-returned"]
    assert rep_out == src_out
    assert not [e for e in rep_events if e.type == "replay.diverged"]
    assert {r.source for r in _ports().tool_calls.list_calls(replay.runId)} == {"recorded"}
    branch = client.runs_fork(src.runId, ForkRunRequest(fromSeq=0, mode="branch"))
    assert wait_terminal(client, branch.runId).status == "completed"
    assert _ports().host.counter_read("COUNTER#tenant-a", key) == 2


def test_replay_of_a_completed_side_effect_run_serves_the_record_without_divergence(host):
    client = host.client(host.key_a)
    src = client.runs_create(CreateRunRequest(workflowId="conformance-replay-side-effect", inputs={"delayMs": 50}))
    assert wait_terminal(client, src.runId).status == "completed"
    fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=0, mode="replay"))
    assert wait_terminal(client, fork.runId).status == "completed"
    fe = all_events(client, fork.runId)
    assert not [e for e in fe if e.type.startswith("replay.")]
    assert _ledger(fork.runId) == [] and len(_ledger(src.runId)) == 1


@pytest.mark.parametrize("where", ["zero", "middle", "last"])
def test_prefix_is_byte_equivalent_event_by_event(host, where):
    client = host.client(host.key_a)
    src = client.runs_create(CreateRunRequest(workflowId="conformance-multi-node"))
    wait_terminal(client, src.runId)
    source = _ports().events.read_events(src.runId)
    from_seq = {"zero": 0, "middle": len(source) // 2, "last": len(source) - 1}[where]
    fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=from_seq, mode="replay"))
    wait_terminal(client, fork.runId)
    child = _ports().events.read_events(fork.runId)
    for s, c in zip(source[:from_seq], child[:from_seq], strict=True):
        assert {k: v for k, v in c.items() if k not in ("eventId", "runId")} == {
            k: v for k, v in s.items() if k not in ("eventId", "runId")
        }
        assert c["runId"] == fork.runId and c["eventId"] != s["eventId"]
    # the replayed tail reproduces the source (no divergence) and the run completes; a node the prefix left in
    # flight is restarted, so its node.started comes again at fromSeq (0170.fork-prefix-boundary)
    restarted = ["node.started"] if source[from_seq]["type"] == "node.completed" else []
    assert [e["type"] for e in child] == [e["type"] for e in source[:from_seq]] + restarted + [
        e["type"] for e in source[from_seq:]
    ]
    assert where != "middle" or restarted
    assert not [e for e in child if e["type"] == "replay.diverged"]


def test_branch_overlay_tags_show_on_the_branch_only(host):
    client = host.client(host.key_a)
    src = client.runs_create(CreateRunRequest(workflowId="conformance-noop", tags=["source"]))
    wait_terminal(client, src.runId)
    br = client.runs_fork(src.runId, ForkRunRequest(fromSeq=1, mode="branch", runOptionsOverlay={"tags": ["branch"]}))
    wait_terminal(client, br.runId)
    assert client.runs_get(br.runId).tags == ["branch"]
    assert client.runs_get(src.runId).tags == ["source"]


def test_fork_refusals(host):
    client = host.client(host.key_a)
    src = client.runs_create(CreateRunRequest(workflowId="conformance-noop"))
    wait_terminal(client, src.runId)
    path = f"/runs/{_wire(src.runId)}:fork"

    def post(body, key=host.key_a, p=path):
        return raw(host.base_url, "POST", p, body, key=key)

    cases = [
        ({"mode": "replay", "runOptionsOverlay": {"tags": ["x"]}}, 400, "validation_error"),
        ({"mode": "branch"}, 400, "validation_error"),
        ({"mode": "replay", "fromSeq": -1}, 400, "validation_error"),
        ({"mode": "replay", "fromSeq": "3"}, 400, "validation_error"),
        ({"mode": "replay", "fromSeq": True}, 400, "validation_error"),
        ({"mode": "rerun", "fromSeq": 0}, 400, "validation_error"),
        ({"mode": "replay", "fromSeq": 0, "extra": 1}, 400, "validation_error"),
        ({"mode": "branch", "fromSeq": 999999}, 422, "fork_point_invalid"),
    ]
    for body, status, code in cases:
        r = post(body)
        assert (r.status, r.json["error"]) == (status, code), body
    assert post({"mode": "replay", "runOptionsOverlay": {}}).status == 201
    foreign = post({"mode": "replay", "fromSeq": 0}, key=host.key_b)
    unknown = post({"mode": "replay", "fromSeq": 0}, key=host.key_b, p="/runs/tenant-b~2Fr-00000000000000000000:fork")
    assert foreign.status == unknown.status == 404
    assert foreign.text == unknown.text and src.runId not in foreign.text


def test_fork_of_a_purged_history_is_410_run_expired(host):
    client = host.client(host.key_a)
    src = client.runs_create(CreateRunRequest(workflowId="conformance-multi-node"))
    wait_terminal(client, src.runId)
    _lose(src.runId, 0)
    r = raw(host.base_url, "POST", f"/runs/{_wire(src.runId)}:fork", {"mode": "replay", "fromSeq": 2}, key=host.key_a)
    assert r.status == 410 and r.json["error"] == "run_expired"
    assert r.json["details"]["sourceRunId"] == src.runId and r.json["details"]["fromSeq"] == 2


def test_a_hole_in_the_history_fails_the_fork_run_expired_in_its_first_task(host):
    # Given a source whose log lost an event in the middle (the request reads only the first event)
    client = host.client(host.key_a)
    src = client.runs_create(CreateRunRequest(workflowId="conformance-multi-node"))
    wait_terminal(client, src.runId)
    _lose(src.runId, 3)
    # When it is forked, the request answers at once (it no longer reads the whole log)
    r = raw(host.base_url, "POST", f"/runs/{_wire(src.runId)}:fork", {"mode": "replay", "fromSeq": 2}, key=host.key_a)
    assert r.status == 201, r.text
    # Then the fork's first task finds the hole and fails the child with the spec's code, before copying anything
    snap = wait_terminal(client, r.json["runId"])
    assert snap.status == "failed" and snap.error.code == "run_expired"
    got = raw(host.base_url, "GET", f"/runs/{_wire(r.json['runId'])}", key=host.key_a).json
    assert got["error"]["details"] == {"sourceRunId": src.runId, "fromSeq": 2, "boundary": 1}
    assert types_of(all_events(client, r.json["runId"])) == [("run.failed", None)]


def test_a_branch_reads_no_index_and_checks_only_its_prefix(host):
    from shared.keys import FORK_SOURCE_SK

    # Given a source whose log lost event 3
    client = host.client(host.key_a)
    src = client.runs_create(CreateRunRequest(workflowId="conformance-multi-node"))
    wait_terminal(client, src.runId)
    _lose(src.runId, 3)

    def branch(from_seq: int) -> str:
        r = raw(
            host.base_url,
            "POST",
            f"/runs/{_wire(src.runId)}:fork",
            {"mode": "branch", "fromSeq": from_seq},
            key=host.key_a,
        )
        assert r.status == 201, r.text
        return str(r.json["runId"])

    # When a branch copies a prefix that holds the hole, it fails run_expired; one whose prefix ends before it runs
    gone, whole = branch(5), branch(3)
    assert wait_terminal(client, gone).status == "failed"
    got = raw(host.base_url, "GET", f"/runs/{_wire(gone)}", key=host.key_a).json
    assert got["error"]["code"] == "run_expired" and got["error"]["details"]["boundary"] == 1
    assert wait_terminal(client, whole).status == "completed"
    # and neither stored an index, not even an empty one (a workflow branch resolves nothing from its source)
    assert _ports().runs.get_aux(whole, FORK_SOURCE_SK) is None
    assert _ports().runs.get_aux(gone, FORK_SOURCE_SK) is None


def test_the_fork_index_holds_only_what_replay_needs(host):
    from shared.keys import FORK_SOURCE_SK

    # Given a completed run with a noop, a hold and a side-effecting node
    client = host.client(host.key_a)
    src = client.runs_create(CreateRunRequest(workflowId="conformance-replay-side-effect", inputs={"delayMs": 10}))
    assert wait_terminal(client, src.runId).status == "completed"
    # When it is replayed
    fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=0, mode="replay"))
    assert wait_terminal(client, fork.runId).status == "completed"
    # Then the index its first task stored names the side-effecting node's outcome and nothing else
    index = _ports().runs.get_aux(fork.runId, FORK_SOURCE_SK)
    assert list(index["outcomes"]) == ["effect"] and index["calls"] == [] and index["resolutions"] == {}


def test_diff_names_the_first_divergence(host):
    client = host.client(host.key_a)
    src = client.runs_create(CreateRunRequest(workflowId="conformance-replay-side-effect", inputs={"delayMs": 6000}))
    _wait_for(client, src.runId, lambda ev: ("node.started", "wait") in types_of(ev))
    client.runs_cancel(src.runId)
    wait_terminal(client, src.runId)
    fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=0, mode="replay"))
    wait_terminal(client, fork.runId, timeout=30)
    d = client.runs_diff(fork.runId, src.runId)
    assert d.a == fork.runId and d.b == src.runId and d.divergedAtSeq == 2
    assert d.eventDiffs[0].op == "changed" and d.eventDiffs[0].aEvent["type"] == "node.completed"
    assert d.stateDiff["status"] == {"a": "failed", "b": "cancelled"}
    same = client.runs_diff(src.runId, src.runId)
    assert same.divergedAtSeq is None and same.eventDiffs == []


def test_effect_seam_manifest_covers_every_effect_path(host):
    from shared.engine.registry import NODE_TYPES, TOOLS

    m = host.client(host.key_a).host_effect_seams()
    assert m.manifestVersion == "1" and m.seams
    assert all(s.guarded and s.guardedBy for s in m.seams)
    assert {s.kind for s in m.seams} <= {"http", "queue", "storage", "provider-sdk", "webhook-fanout"}
    listed = {s.seam for s in m.seams}
    # completeness: every side-effecting node type and tool names its seams, and each is listed
    for registry in (NODE_TYPES, TOOLS):
        for entry in registry.values():
            if entry.role == "side-effect" and entry.seams:
                assert {s.seam for s in entry.seams} <= listed
    for type_id in ("core.http", "core.conformance.side-effect", "core.tool"):
        assert NODE_TYPES[type_id].seams, type_id
    assert TOOLS["conformance.eval:counter"].seams
    # the outbound paths of registered tools and their credentials are listed too
    assert {"tool.http", "tool.mcp", "secrets.credentials"} <= listed
    # and so are the model providers that leave the process (the mock answers in-process)
    models = {s.seam: s for s in m.seams if s.seam.startswith("model.")}
    assert set(models) == {"model.bedrock", "model.openai"}
    assert all(s.kind == "provider-sdk" and "model-call log" in s.guardedBy for s in models.values())


def test_discovery_advertises_replay_and_the_replay_fixtures(host):
    caps = host.client("anyone").discovery_capabilities()
    replay = caps.families["replay"].facets
    assert replay["modes"] == ["replay", "branch"] and replay["effectSeamsManifest"] == "/host/effect-seams"
    assert replay["retention"]["days"] >= 1
    assert {"conformance-replay-side-effect", "conformance-replay-ordinal-loop"} <= set(caps.raw["fixtures"])


def _loop_source(client):
    """A completed ~1,000-event run (a loop of two noop nodes, 4 events per iteration)."""
    from shared.services.workflows import register_workflow

    doc = definition(
        unique("loop"),
        [node("s", "core.noop"), node("a", "core.noop"), node("b", "core.noop")],
        [edge("s", "a", eid="sa"), edge("a", "b", eid="ab"), edge("b", "a", eid="ba")],
        settings={"maxLoopbackIterations": 249},
    )
    register_workflow(_ports(), "tenant-a", doc)
    src = client.runs_create(CreateRunRequest(workflowId=doc["id"]))
    wait_terminal(client, src.runId)
    return src


def test_the_prefix_is_copied_with_batched_writes(host):
    # Given a 1,002-event source run
    client = host.client(host.key_a)
    src = _loop_source(client)
    n = _ports().runs.get_run(src.runId).last_seq  # fork before the terminal event: copy n events
    calls: list[str] = []

    def count(params=None, **_):
        items = [
            p["PutRequest"]["Item"]
            for reqs in (params or {}).get("RequestItems", {}).values()
            for p in reqs
            if "PutRequest" in p
        ]
        if items and all(i.get("runId", {}).get("S") not in (None, src.runId) for i in items):
            calls.append("BatchWriteItem")

    ddb = _ports().events._c
    ddb.meta.events.register("before-parameter-build.dynamodb.BatchWriteItem", count)
    try:
        fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=n, mode="replay"))
        assert wait_terminal(client, fork.runId).status == "completed"
    finally:
        ddb.meta.events.unregister("before-parameter-build.dynamodb.BatchWriteItem", count)
    # Then it was copied as pages of 99 events, 25 pages a write request: never a request per event or per page
    ev = _ports().events
    pages = ev._c.query(
        TableName=ev._t,
        KeyConditionExpression="runId = :r AND seq < :n",
        ExpressionAttributeValues={":r": {"S": fork.runId}, ":n": {"N": str(n)}},
    )["Items"]
    assert len(pages) == -(-n // 99) and len(calls) == -(-len(pages) // 25)
    assert _ports().runs.get_run(fork.runId).last_seq == n + 0


def test_a_replay_reads_its_source_once_and_compares_digests(host):
    # Given a 1,000-event source run
    from shared.engine import forkindex

    client = host.client(host.key_a)
    src = _loop_source(client)
    n = _ports().runs.get_run(src.runId).last_seq + 1
    read: list[int] = []

    def mark(params=None, context=None, **_):  # a Query of the source's events, whatever thread sends it
        if (params or {}).get("ExpressionAttributeValues", {}).get(":r", {}).get("S") == src.runId:
            context["openwop_source"] = True

    def returned(parsed=None, context=None, **_):
        if (context or {}).get("openwop_source"):
            read.append(len((parsed or {}).get("Items", [])))

    ddb = _ports().events._c
    ddb.meta.events.register("before-parameter-build.dynamodb.Query", mark)
    ddb.meta.events.register("after-call.dynamodb.Query", returned)
    try:
        # When it is replayed from 0
        fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=0, mode="replay"))
        assert wait_terminal(client, fork.runId).status == "completed"
    finally:
        ddb.meta.events.unregister("before-parameter-build.dynamodb.Query", mark)
        ddb.meta.events.unregister("after-call.dynamodb.Query", returned)
    # Then the source's events were read once (the request checks its first event is there: one page; the index
    # task reads the log), and the replay compared 8-byte digests instead of reading them again
    ev = _ports().events
    pages = ev._c.query(
        TableName=ev._t, KeyConditionExpression="runId = :r", ExpressionAttributeValues={":r": {"S": src.runId}}
    )["Items"]
    assert sum(read) == 1 + len(pages) and len(pages) < n / 50
    assert not any(e["type"] == "replay.diverged" for e in _ports().events.read_events(fork.runId))
    digests = _ports().blobs.get_range(forkindex.digests_key(fork.runId), 0, 10 * n)
    assert len(digests) == 8 * n
    first = _ports().events.read_events(src.runId)[0]
    assert digests[:8] == forkindex.event_digest(first)


def test_a_fork_s_end_gives_back_no_tenant_slot_it_never_took(host):
    # Given a completed run (which held a slot of its tenant while it ran) and a branch fork of it (which holds none:
    # decision 0160)
    from tests.helpers import requests_sent

    client, ports = host.client(host.key_a), _ports()
    with requests_sent(ports.slots._c, "TransactWriteItems") as sent:
        src = client.runs_create(CreateRunRequest(workflowId="conformance-noop"))
        assert wait_terminal(client, src.runId).status == "completed"
        eventually(lambda: len(_slot_writes(sent, src.runId)) == 2, timeout=30)  # its slot taken, then given back
        # When the fork runs to its end
        fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=0, mode="branch"))
        assert wait_terminal(client, fork.runId).status == "completed"
    # Then its end wrote nothing to its tenant's slots (no release of a slot it never took)
    assert _slot_writes(sent, fork.runId) == []


def _slot_writes(sent: list, run_id: str) -> list:
    """The transactions of ``sent`` on the tenant slots' items of ``run_id`` (``SLOTS#<tenant>`` / ``run#<runId>``)."""
    from tests.helpers import naming

    return [p for p in naming(sent, f"run#{run_id}") if "SLOTS#" in str(p)]


def test_a_branch_takes_its_first_steps_in_the_task_that_copies_its_last_prefix_page(host):
    # Given a 1,002-event source run, and a branch of it from event 500 whose prefix one copy task holds
    client = host.client(host.key_a)
    src = _loop_source(client)
    ports = _ports()
    branch = client.runs_fork(src.runId, ForkRunRequest(fromSeq=500, mode="branch"))
    # When it runs to its end
    assert wait_terminal(client, branch.runId).status == "completed"
    # Then its one execution entered Advance once: the task that copied its prefix went on with its steps, with the
    # run as its copy left it (a second task, in a second execution, would have read it again)
    states = entered(host, str(ports.runs.get_run(branch.runId).execution_arn))
    assert states == ["Advance"], states
    assert described(host, execution_arn("fork", branch.runId, 1)) is None
    # and its log is the source's prefix, byte for byte but for ids, then its own steps to the end, in order
    source, forked = ports.events.read_events(src.runId), ports.events.read_events(branch.runId)
    assert [e["sequence"] for e in forked] == list(range(len(forked))) and forked[-1]["type"] == "run.completed"
    assert [e["type"] for e in forked[:500]] == [e["type"] for e in source[:500]]
    assert ports.runs.get_run(branch.runId).state["status"] == "completed"


def test_a_new_run_s_create_checks_no_tombstone_and_a_fork_s_checks_its_source_s(host):
    # Given a completed run
    from tests.helpers import naming, requests_sent

    client = host.client(host.key_a)
    ports = _ports()
    with requests_sent(ports.runs._c, "TransactWriteItems") as txs:
        # When a run is created with an id drawn for it, and a fork of it is created
        src = client.runs_create(CreateRunRequest(workflowId="conformance-multi-node"))
        assert wait_terminal(client, src.runId).status == "completed"
        fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=3, mode="branch"))
        assert wait_terminal(client, fork.runId).status == "completed"

    def create_of(run_id: str) -> list[str]:
        creates = [
            t["TransactItems"]
            for t in naming(txs, run_id)
            if any(
                i.get("Put", {}).get("ConditionExpression") == "attribute_not_exists(pk)"
                and i["Put"]["Item"].get("pk") == {"S": run_id}
                and i["Put"]["Item"].get("sk") == {"S": "RUN"}
                for i in t["TransactItems"]
            )
        ]
        assert len(creates) == 1, creates
        return [next(iter(i)) for i in creates[0]]

    # Then the run's create checked no tombstone (no tombstone can name an id no run had), and the fork's checked
    # its source's (an erasure of the source refuses the fork or finds its link)
    assert "ConditionCheck" not in create_of(src.runId)
    assert create_of(fork.runId).count("ConditionCheck") == 1
    # and both were created whole
    assert ports.runs.get_run(src.runId) is not None and ports.runs.get_run(fork.runId) is not None


def test_a_cancel_between_a_branch_s_prefix_copy_and_its_first_steps_refuses_those_steps(host):
    # Given a 1,002-event source run and a branch of it from event 500, and a cancel of the branch landing after its
    # prefix copy stored its progress and before the same task's first append of its own steps
    import threading

    from tests.helpers import hooked

    client = host.client(host.key_a)
    src = _loop_source(client)
    ports = _ports()
    fired: dict[str, object] = {}
    lock = threading.Lock()

    def before(params=None, **_):
        items = (params or {}).get("TransactItems", [])
        puts = [i["Put"]["Item"] for i in items if "Put" in i and i["Put"]["TableName"] == ports.settings.events_table]
        if not puts or puts[0].get("seq") != {"N": "500"}:
            return
        with lock:
            if fired:
                return
            fired["run"] = puts[0]["runId"]["S"]
        fired["cancel"] = raw(host.base_url, "POST", f"/runs/{_wire(fired['run'])}/cancel", {}, key=host.key_a).status

    with hooked(ports.events._c, {"before-parameter-build.dynamodb.TransactWriteItems": before}):
        branch = client.runs_fork(src.runId, ForkRunRequest(fromSeq=500, mode="branch"))
        # When the branch runs
        snap = wait_terminal(client, branch.runId)
    # Then the cancel took the position after the prefix and the task's steps wrote nothing: the log is the prefix,
    # then the cancel's events, whole and in order
    assert fired.get("run") == branch.runId and fired.get("cancel") == 200, fired
    events = ports.events.read_events(branch.runId)
    assert snap.status == "cancelled" and [e["sequence"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[500:]] in (["run.cancelled"], ["node.cancelled", "run.cancelled"])
    assert ports.runs.get_run(branch.runId).last_seq == len(events) - 1
