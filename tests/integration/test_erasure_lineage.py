"""Erasure follows lineage: after a run's erasure no table and no object holds anything derived from it.

Derived from a run: its forks (their copied prefixes and fork indexes), forks of those forks, its effect-ledger
rows, the idempotency records whose stored answers name it or its forks, its tool calls and S3 objects.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from shared.protocol.ids import project_id
from tests.faults import scan_for
from tests.helpers import unique
from tests.wire import raw, wait_terminal
from tests.workflows import register_scripted_agent


def _ports():
    from shared.wiring import get_ports

    return get_ports()


def _workflow(marker: str) -> str:
    return register_scripted_agent("tenant-a", "lineage", then_effect=True)


def _scan(host: Any, needles: list[str]) -> list[tuple[str, str]]:
    from shared.settings import get_settings

    s = get_settings()
    tables = [s.runs_table, s.events_table, s.tool_calls_table, s.host_table, s.idempotency_table]
    return scan_for(host.aws.client("dynamodb"), host.aws.client("s3"), tables, s.fixtures_bucket, needles)


def _idem_key() -> str:
    return uuid.uuid4().hex


def _post(host: Any, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = raw(host.base_url, "POST", path, body, key=host.key_a, headers={"Idempotency-Key": _idem_key()})
    assert r.status == 201, r.text
    return r.json


def test_erasure_leaves_nothing_derived_from_the_run_in_any_table_or_object(host):
    from shared.local.ddb_streams import wait_for_stream_idle

    # Given a source run whose agent saw a unique marker, made tool calls and performed an effect,
    marker = unique("personal-data")
    client = host.client(host.key_a)
    script = {
        "calls": [
            {"tool": "conformance.eval:echo", "args": {"note": marker}},
            {"tool": "conformance.eval:counter", "args": {"op": "inc", "key": unique("k")}},
        ],
        "answer": "done",
    }
    source = _post(host, "/runs", {"workflowId": _workflow(marker), "inputs": {"script": script}})["runId"]
    assert wait_terminal(client, source).status == "completed"
    # its replay fork, a branch fork that re-ran the effect, and a fork of the fork (each with an Idempotency-Key)
    replay = _post(host, f"/runs/{project_id(source)}:fork", {"mode": "replay", "fromSeq": 0})["runId"]
    branch = _post(host, f"/runs/{project_id(source)}:fork", {"mode": "branch", "fromSeq": 10})["runId"]
    wait_terminal(client, replay)  # its log must reach the fork point (a fork request no longer waits on a log read)
    grandchild = _post(host, f"/runs/{project_id(replay)}:fork", {"mode": "replay", "fromSeq": 1})["runId"]
    for run_id in (replay, branch, grandchild):
        wait_terminal(client, run_id)
    ids = [source, replay, branch, grandchild]
    before = {t for t, _ in _scan(host, ids + [marker]) if not t.startswith(("runs/", "derived/"))}
    assert len(before) == 5, before  # every table holds something of the lineage before the erasure
    assert _ports().host.query("LEDGER#tenant-a", f"{branch}#")  # the branch re-ran the effect live

    # When the source is erased
    assert raw(host.base_url, "DELETE", f"/runs/{project_id(source)}", key=host.key_a).status == 204
    assert wait_for_stream_idle(30)

    # Then no table and no object holds its id, a fork's id, or the marker its agent saw
    assert _scan(host, ids + [marker]) == []
    for run_id in ids:
        assert raw(host.base_url, "GET", f"/runs/{project_id(run_id)}", key=host.key_a).status == 404
    # and a fork of the erased source is refused like any unknown run
    r = raw(host.base_url, "POST", f"/runs/{project_id(source)}:fork", {"mode": "replay"}, key=host.key_a)
    assert (r.status, r.json["error"]) == (404, "not_found")


def test_an_idempotency_key_of_an_erased_run_no_longer_answers_with_its_id(host):
    from shared.local.ddb_streams import wait_for_stream_idle

    # Given a run created with an Idempotency-Key, then erased
    key = _idem_key()
    body = {"workflowId": "conformance-noop"}
    first = raw(host.base_url, "POST", "/runs", body, key=host.key_a, headers={"Idempotency-Key": key})
    assert first.status == 201
    run_id = first.json["runId"]
    wait_terminal(host.client(host.key_a), run_id)
    assert raw(host.base_url, "DELETE", f"/runs/{project_id(run_id)}", key=host.key_a).status == 204
    assert wait_for_stream_idle(30)
    # When the same request is retried with the same key
    again = raw(host.base_url, "POST", "/runs", body, key=host.key_a, headers={"Idempotency-Key": key})
    # Then it is a new request: a new run, never the erased run's id
    assert again.status == 201 and "openwop-idempotent-replay" not in again.headers
    assert again.json["runId"] != run_id and run_id not in again.text


def test_deleting_an_id_that_never_existed_costs_nothing_and_leaves_nothing(host):
    # Given an id of the caller's tenant that never existed, and a count of DynamoDB operations
    ghost = "tenant-a/r-" + "0" * 22
    ops: list[str] = []
    client = _ports().runs._c

    def count(model: Any = None, params: Any = None, **_: Any) -> None:
        if ghost in json.dumps(params, default=str):  # other tests' runs share this client on other threads
            ops.append(model.name)

    client.meta.events.register("before-call.dynamodb.*", count)
    try:
        r = raw(host.base_url, "DELETE", f"/runs/{project_id(ghost)}", key=host.key_a)
    finally:
        client.meta.events.unregister("before-call.dynamodb.*", count)
    # Then it answers like any erasure, reads once, and writes nothing (no 400-day tombstone)
    assert r.status == 204
    assert [op for op in ops if op not in ("GetItem", "Query", "BatchGetItem", "TransactGetItems")] == []  # reads only
    assert _ports().runs.is_tombstoned(ghost) is False


def test_an_eval_whose_fixture_source_is_erased_mid_run_fails_with_fixtures_gone(host):
    from shared import keys
    from tests.integration.test_eval_runs import eval_request, run_eval

    # Given an eval run served from a recorded source, whose copy vanishes before its trials run
    from tests.integration.test_recorded_fixtures import REPLAY, SOURCE

    client = host.client(host.key_a)
    source = run_eval(client, SOURCE)
    ports = _ports()
    failed = []
    for _ in range(5):  # the copy must vanish before the trial reads it: retry the rare lost race
        created = client.runs_create(eval_request(REPLAY, fixtureRuns={"record": source}))
        # (the source's erasure removes every copy under its prefix: do exactly that while the eval starts)
        ports.blobs.delete_prefix(keys.derived_prefix(source))
        snap = wait_terminal(client, created.runId)
        if snap.status == "failed":
            failed.append(snap)
            break
    # Then the run fails with the RFC 0252 code, never a generic execution failure
    assert failed
    assert raw(host.base_url, "GET", f"/runs/{project_id(failed[0].runId)}", key=host.key_a).json["error"] == {
        "code": "eval_recorded_fixtures_gone",
        "message": "the recorded fixtures this eval run was served are gone",
    }


def _served_suites(host: Any, marker: str) -> tuple[str, str]:
    """A recording suite whose echo tool answers ``marker`` (the source's tool output), and a suite replaying it."""
    from tests.integration.test_eval_runs import golden, put_suite, script

    calls = script(("conformance.eval:echo", {"note": marker}), ("conformance.eval:echo", {"again": marker}))
    version = f"1.0.{uuid.uuid4().int % 1_000_000}"
    record = {
        "suiteId": "tests.local.evals.erased-source",
        "version": version,
        "modes": ["golden"],
        "tasks": [
            {
                "taskId": "t",
                "input": calls,
                "expected": golden("done"),
                "fixtures": {"toolResponses": [], "onMiss": "live"},
            }
        ],
    }
    replay = {
        "suiteId": "tests.local.evals.erased-replay",
        "version": version,
        "modes": ["golden"],
        "tasks": [{"taskId": "t", "input": calls, "expected": golden("done")}],
    }
    for doc in (record, replay):
        assert put_suite(host, host.key_a, doc).status == 201
    return f"{record['suiteId']}@{version}", f"{replay['suiteId']}@{version}"


def _scan_answers(host: Any, ids: list[str], marker: str, suites: tuple[str, str]) -> list[tuple[str, str]]:
    """``_scan`` for the ids and the echoed answer, once the two suites are dropped: their task inputs hold the
    same bytes as the echo's answer, and they are the tenant's own registrations, not derived from any run."""
    from shared.storage.schema import SUITE_PK_PREFIX

    for ref in suites:
        assert _ports().host.delete_item(SUITE_PK_PREFIX + "tenant-a", ref)
    return _scan(host, [*ids, marker])


def test_erasure_reaches_the_evals_served_from_the_run_their_forks_and_dead_letters(host):
    from shared.cli.webhook_receiver import WebhookReceiver
    from shared.local.ddb_streams import wait_for_stream_idle
    from shared.settings import get_settings
    from shared.storage.webhooks import SUB_PK
    from tests.helpers import eventually
    from tests.integration.test_eval_runs import run_eval
    from tests.wire import all_events

    # Given a receiver that fails every delivery, subscribed to the completion of runs tagged for this test,
    marker, tag = unique("served-answer"), unique("erase")
    client = host.client(host.key_a)
    rx = WebhookReceiver()
    rx.start()
    try:
        hook = raw(
            host.base_url,
            "POST",
            "/webhooks",
            {"url": rx.url + "/fail", "events": ["run.completed"], "tags": [tag]},
            key=host.key_a,
        ).json["webhookId"]
        # a source R whose tool answered the marker, an eval E served from R, and a replay fork of E
        record, replay = _served_suites(host, marker)
        source = run_eval(client, record, tags=[tag])
        served = run_eval(client, replay, fixtureRuns={"t": source}, tags=[tag])
        returned = [e.payload for e in all_events(client, served) if e.type == "agent.tool-returned"]
        assert [r["outcome"] for r in returned] == [{"note": marker}, {"again": marker}]
        fork = _post(host, f"/runs/{project_id(served)}:fork", {"mode": "replay", "fromSeq": 0})["runId"]
        assert wait_terminal(client, fork).status == "completed"
        # and the deliveries of R's and E's completion dead-lettered (a replay fork delivers nothing)
        dead = eventually(
            lambda: (
                (
                    d := raw(host.base_url, "GET", f"/webhooks/{project_id(hook)}/dead-letters", key=host.key_a).json[
                        "deliveries"
                    ]
                )
                and len(d) >= 2
                and d
            ),
            timeout=60,
            interval=0.5,
        )
        assert sorted(d["runId"] for d in dead) == sorted([source, served])
        ids = [source, served, fork]
        held = {t for t, _ in _scan(host, ids + [marker])}
        assert {get_settings().runs_table, get_settings().host_table} <= held  # runs, dead letters

        # When R is erased
        assert raw(host.base_url, "DELETE", f"/runs/{project_id(source)}", key=host.key_a).status == 204
        assert wait_for_stream_idle(30)

        # Then R, the eval served from it and the eval's fork answer 404 like unknown runs, their logs included,
        unknown = raw(host.base_url, "GET", f"/runs/{project_id('tenant-a/r-' + '0' * 22)}/events/poll", key=host.key_a)
        for run_id in ids:
            assert raw(host.base_url, "GET", f"/runs/{project_id(run_id)}", key=host.key_a).status == 404
            poll = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/events/poll", key=host.key_a)
            assert (poll.status, poll.json) == (unknown.status, unknown.json) and unknown.status == 404
        # the webhook's dead letters no longer name them,
        page = raw(host.base_url, "GET", f"/webhooks/{project_id(hook)}/dead-letters", key=host.key_a)
        assert (page.status, page.json["deliveries"]) == (200, [])
        # and no table and no object holds their ids or the tool output R's agent was served
        assert _scan_answers(host, ids, marker, (record, replay)) == []
    finally:
        rx.stop()
        _ports().host.delete_item(SUB_PK + "tenant-a", hook)


def test_an_eval_in_flight_when_its_source_is_erased_goes_with_it(host):
    from shared.local.ddb_streams import wait_for_stream_idle
    from tests.helpers import wait_for_execution
    from tests.integration.test_eval_runs import eval_request, run_eval

    # Given a source whose tool answered a marker, and an eval served from it that was just started
    marker = unique("in-flight-answer")
    client = host.client(host.key_a)
    record, replay = _served_suites(host, marker)
    source = run_eval(client, record)
    served = client.runs_create(eval_request(replay, fixtureRuns={"t": source})).runId
    arn = _ports().runs.get_run(served).execution_arn

    # When the source is erased while the eval runs
    assert raw(host.base_url, "DELETE", f"/runs/{project_id(source)}", key=host.key_a).status == 204
    assert wait_for_stream_idle(30)
    wait_for_execution(host.aws.client("stepfunctions"), arn, timeout=30)  # stopped, or finished just before
    assert wait_for_stream_idle(30)

    # Then the eval is erased too: 404, and nothing it wrote (before or after the erasure) holds the answer
    assert raw(host.base_url, "GET", f"/runs/{project_id(served)}", key=host.key_a).status == 404
    assert _scan_answers(host, [source, served], marker, (record, replay)) == []


def test_an_eval_whose_source_erasure_begins_while_it_is_created_is_refused_and_leaves_nothing(host):
    from shared.local.ddb_streams import wait_for_stream_idle
    from shared.services.erasure import request_erasure
    from tests.integration.test_eval_runs import eval_request, refused, run_eval

    # Given a recorded source, and the uniform refusal of an unusable source
    marker, tag = unique("racing-answer"), unique("racing")
    client = host.client(host.key_a)
    record, replay = _served_suites(host, marker)
    source = run_eval(client, record)
    unknown = refused(client, eval_request(replay, fixtureRuns={"t": "tenant-a/r-" + "1" * 22}))
    ports = _ports()
    ddb = ports.runs._c

    def erase_first(params: Any = None, **_: Any) -> None:  # the source's erasure begins just before the link
        if "CHILD#" in json.dumps(params, default=str) and source in json.dumps(params, default=str):
            ddb.meta.events.unregister("before-call.dynamodb.TransactWriteItems", erase_first)
            request_erasure(ports, source)

    # When an eval served from it is created while its erasure begins (after the source was checked)
    ddb.meta.events.register("before-call.dynamodb.TransactWriteItems", erase_first)
    try:
        text = refused(client, eval_request(replay, fixtureRuns={"t": source}, tags=[tag]))
    finally:
        ddb.meta.events.unregister("before-call.dynamodb.TransactWriteItems", erase_first)
    assert wait_for_stream_idle(30)

    # Then it is refused with the same bytes as an unknown source, and no eval run, copy or answer is left
    assert text == unknown and source not in text
    assert _scan_answers(host, [source, tag], marker, (record, replay)) == []
