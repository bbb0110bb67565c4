"""The foundation surface through the official client (and raw HTTP where the wire matters)."""

from __future__ import annotations

import json

import pytest
from openwop_client import WopError
from openwop_client.types import CancelRunRequest, CreateRunRequest

from tests.wire import all_events, raw, types_of, wait_terminal


def test_discovery_is_unauthenticated_and_closed(host):
    # Given the local host / When the client reads discovery
    caps = host.client("no-such-key").discovery_capabilities()
    # Then the v2 root parses and lists the workflow fixtures
    assert caps.protocolVersions == ["2.0"] and caps.preferredVersion == "2.0"
    assert {"conformance-noop", "conformance-multi-node"} <= set(caps.raw["fixtures"])
    assert caps.families["runList"].facets["maxPageSize"] == 100


def test_discovery_etag_answers_304(host):
    first = raw(host.base_url, "GET", "/.well-known/openwop")
    again = raw(host.base_url, "GET", "/.well-known/openwop", headers={"If-None-Match": first.headers["etag"]})
    assert first.status == 200 and again.status == 304 and again.text == ""
    assert again.headers["openwop-version"] == "2.0"


def test_create_get_and_events_of_a_workflow_run(host):
    client = host.client(host.key_a)
    # When tenant A starts the multi-node fixture
    created = client.runs_create(CreateRunRequest(workflowId="conformance-multi-node"))
    # Then the id is tenant-bound and the links are projected
    assert created.runId.startswith("tenant-a/") and created.status == "pending"
    assert created.eventsUrl == "/runs/" + created.runId.replace("/", "~2F") + "/events"
    snap = wait_terminal(client, created.runId)
    assert snap.status == "completed" and snap.owner.tenant == "tenant-a"
    assert snap.eventLogSchemaVersion == 3 and snap.owner.subject.lane == "api-key"
    events = all_events(client, created.runId)
    assert types_of(events) == [
        ("run.started", None),
        ("node.started", "A"),
        ("node.completed", "A"),
        ("node.started", "B"),
        ("node.completed", "B"),
        ("node.started", "C"),
        ("node.completed", "C"),
        ("run.completed", None),
    ]
    assert [e.sequence for e in events] == list(range(8))
    assert (
        events[0].payload["owner"]
        == json.loads(raw(host.base_url, "GET", "/runs/" + created.runId.replace("/", "~2F"), key=host.key_a).text)[
            "owner"
        ]
    )
    assert events[-1].payload == {"outputs": {"C": {}}}


def test_sse_streams_through_the_terminal_event(host):
    client = host.client(host.key_a)
    created = client.runs_create(CreateRunRequest(workflowId="conformance-noop"))
    got = [e.type for e in client.runs_events(created.runId, stream_mode="updates", timeout_seconds=20)]
    assert got == ["run.started", "node.started", "node.completed", "run.completed"]


def test_sse_resumes_after_last_event_id(host):
    client = host.client(host.key_a)
    created = client.runs_create(CreateRunRequest(workflowId="conformance-noop"))
    wait_terminal(client, created.runId)
    got = [e.sequence for e in client.runs_events(created.runId, last_event_id="1", timeout_seconds=20)]
    assert got == [2, 3]


def test_sse_rejects_an_unknown_stream_mode(host):
    created = host.client(host.key_a).runs_create(CreateRunRequest(workflowId="conformance-noop"))
    r = raw(host.base_url, "GET", f"/runs/{created.runId.replace('/', '~2F')}/events?streamMode=bogus", key=host.key_a)
    assert r.status == 400 and r.json["error"] == "unsupported_stream_mode"
    assert r.json["details"]["supported"] == ["values", "updates", "messages", "debug"]


def test_percent_encoded_run_id_is_accepted(host):
    client = host.client(host.key_a)
    created = client.runs_create(CreateRunRequest(workflowId="conformance-noop"))
    r = raw(host.base_url, "GET", "/runs/" + created.runId.replace("/", "%2F"), key=host.key_a)
    assert r.status == 200 and r.json["runId"] == created.runId


def test_get_run_etag_and_304(host):
    client = host.client(host.key_a)
    created = client.runs_create(CreateRunRequest(workflowId="conformance-noop"))
    wait_terminal(client, created.runId)
    path = "/runs/" + created.runId.replace("/", "~2F")
    first = raw(host.base_url, "GET", path, key=host.key_a)
    second = raw(host.base_url, "GET", path, key=host.key_a, headers={"If-None-Match": first.headers["etag"]})
    assert second.status == 304


def test_list_runs_newest_first_with_cursor(host):
    client = host.client(host.key_b)
    ids = [client.runs_create(CreateRunRequest(workflowId="conformance-noop", tags=["list"])).runId for _ in range(3)]
    page1 = client.runs_list(limit=2)
    assert [r.runId for r in page1.runs] == ids[::-1][:2]
    page2 = client.runs_list(limit=2, cursor=page1.next_cursor)
    assert page2.runs[0].runId == ids[0]
    assert all(r.owner.tenant == "tenant-b" for r in page1.runs + page2.runs)


def test_list_runs_refuses_a_cursor_it_did_not_mint(host):
    r = raw(host.base_url, "GET", "/runs?cursor=bm90LWEtY3Vyc29y", key=host.key_a)
    assert r.status == 400 and r.json["error"] == "validation_error"


def test_list_runs_filters_by_workflow(host):
    client = host.client(host.key_a)
    mine = client.runs_create(CreateRunRequest(workflowId="conformance-multi-node")).runId
    got = client.runs_list(workflow_id="conformance-multi-node", limit=100)
    assert mine in [r.runId for r in got.runs]
    assert {r.workflowId for r in got.runs} == {"conformance-multi-node"}


def test_cancel_mid_hold_ends_cancelled_without_completion(host):
    client = host.client(host.key_a)
    created = client.runs_create(
        CreateRunRequest(workflowId="conformance-replay-side-effect", inputs={"delayMs": 20000})
    )
    # Wait until the hold has started
    for _ in range(100):
        if any(e.type == "node.started" for e in all_events(client, created.runId)):
            break
    answer = client.runs_cancel(created.runId, CancelRunRequest(reason="test"))
    assert answer.status == "cancelled"
    snap = wait_terminal(client, created.runId)
    assert snap.status == "cancelled"
    events = all_events(client, created.runId)
    assert types_of(events)[-2:] == [("node.cancelled", "wait"), ("run.cancelled", None)]
    assert ("node.completed", "wait") not in types_of(events)
    with pytest.raises(WopError) as err:
        client.runs_cancel(created.runId)
    assert err.value.status == 409 and err.value.envelope.error == "run_terminal"


def test_poll_long_waits_and_reports_terminal(host):
    client = host.client(host.key_a)
    created = client.runs_create(CreateRunRequest(workflowId="conformance-noop"))
    wait_terminal(client, created.runId)
    page = client.runs_poll_events(created.runId, after_sequence=3, timeout_seconds=1)
    assert page.events == [] and page.lastSequence == 3 and page.isTerminal and page.status == "completed"


def test_workflow_definition_is_readable(host):
    doc = host.client(host.key_a).workflows_get("conformance-replay-side-effect")
    assert doc["nodes"][1]["typeId"] == "core.conformance.side-effect"


def test_openapi_lists_the_surface(host):
    doc = host.client(host.key_a).discovery_openapi()
    assert doc["paths"]["/runs/{runId}:fork"]["post"]["operationId"] == "forkRun"
    assert doc["paths"]["/runs"]["post"]["operationId"] == "createRun"


# ---------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "body",
    [
        {"workflowId": "conformance-noop", "bogus": 1},
        {"workflowId": "conformance-noop", "configurable": {"version": 1, "evalModes": ["golden"]}},
        {"workflowId": "conformance-noop", "configurable": {"run": {}}},
        {"workflowId": "conformance-noop", "tags": ["x" * 300]},
        {"workflowId": "conformance-noop", "baselineRunId": "tenant-a/r-0000000000000000"},
        {"workflowId": "conformance-noop", "evalModes": ["golden"]},
        {"workflowId": "conformance-noop", "fixtureRuns": {"t": "tenant-a/r-0000000000000000"}},
        {"workflowId": "conformance-replay-side-effect", "inputs": {"delayMs": "soon"}},
        {"workflowId": "bad id with spaces"},
        {},
    ],
)
def test_create_refusals_are_400_and_leave_no_run(host, body):
    client = host.client(host.key_b)
    before = len(client.runs_list(limit=100).runs)
    r = raw(host.base_url, "POST", "/runs", body, key=host.key_b)
    assert r.status == 400, r.text
    assert r.json["error"] == "validation_error" and r.json["message"]
    assert "Traceback" not in r.text
    assert len(client.runs_list(limit=100).runs) == before


def test_create_malformed_json_is_400(host):
    r = raw(
        host.base_url, "POST", "/runs", key=host.key_a, data=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert r.status == 400 and r.json["error"] == "validation_error"


def test_unknown_workflow_is_404(host):
    r = raw(host.base_url, "POST", "/runs", {"workflowId": "no-such-workflow"}, key=host.key_a)
    assert r.status == 404 and r.json["error"] == "not_found"


def test_eval_suite_id_as_workflow_is_404(host):
    r = raw(host.base_url, "POST", "/runs", {"workflowId": "conformance-eval-regression-base"}, key=host.key_a)
    assert r.status == 404 and r.json["error"] == "not_found"


def test_body_tenant_must_match_credential(host):
    r = raw(host.base_url, "POST", "/runs", {"workflowId": "conformance-noop", "tenantId": "tenant-b"}, key=host.key_a)
    assert r.status == 403 and r.json["error"] == "forbidden"


@pytest.mark.parametrize("key", [None, "wrong-key"])
def test_missing_or_wrong_key_is_401(host, key):
    r = raw(host.base_url, "GET", "/runs", key=key)
    assert r.status == 401 and r.json["error"] == "unauthenticated"
    assert r.headers["www-authenticate"] == "Bearer"


def test_unsupported_major_is_406(host):
    r = raw(host.base_url, "GET", "/runs", key=host.key_a, headers={"OpenWOP-Version": "3.0"})
    assert r.status == 406 and r.json["error"] == "protocol_version_unsupported"
    assert r.json["details"]["protocolVersions"] == ["2.0"]


def test_major_two_without_minor_is_served(host):
    r = raw(
        host.base_url,
        "GET",
        "/runs",
        key=host.key_a,
        headers={"OpenWOP-Version": "2", "OpenWOP-Client-Version": "2.46.32"},
    )
    assert r.status == 200 and r.headers["openwop-version"] == "2.0"


def test_foreign_run_is_403_and_unknown_is_404(host):
    created = host.client(host.key_a).runs_create(CreateRunRequest(workflowId="conformance-noop"))
    foreign = raw(host.base_url, "GET", "/runs/" + created.runId.replace("/", "~2F"), key=host.key_b)
    assert foreign.status == 403 and foreign.json["error"] == "id_tenant_mismatch"
    assert created.runId not in foreign.text
    unknown = raw(host.base_url, "GET", "/runs/tenant-b~2Fr-00000000000000000000", key=host.key_b)
    assert unknown.status == 404 and unknown.json["error"] == "not_found"


@pytest.mark.parametrize("path", ["/runs/tenant-a~ZZr-0000000000000000", "/runs/short", "/runs/a~2Fb"])
def test_malformed_run_ids_are_400(host, path):
    r = raw(host.base_url, "GET", path, key=host.key_a)
    assert r.status == 400 and r.json["error"] == "validation_error"


def test_bad_poll_parameters_are_400(host):
    created = host.client(host.key_a).runs_create(CreateRunRequest(workflowId="conformance-noop"))
    wire = created.runId.replace("/", "~2F")
    for qs in ("afterSequence=-1", "afterSequence=x", "timeout=0", "timeout=61"):
        r = raw(host.base_url, "GET", f"/runs/{wire}/events/poll?{qs}", key=host.key_a)
        assert r.status == 400 and r.json["error"] == "validation_error", qs


def test_unknown_route_is_404_envelope(host):
    r = raw(host.base_url, "GET", "/nope", key=host.key_a)
    assert r.status == 404 and r.json["error"] == "not_found"


# ---------------------------------------------------------------------------- idempotency


def test_idempotent_create_replays_and_detects_mismatch(host):
    client = host.client(host.key_a)
    key = "idem-key-0123456789abcdefghij"
    first = raw(
        host.base_url,
        "POST",
        "/runs",
        {"workflowId": "conformance-noop"},
        key=host.key_a,
        headers={"Idempotency-Key": key},
    )
    again = raw(
        host.base_url,
        "POST",
        "/runs",
        {"workflowId": "conformance-noop"},
        key=host.key_a,
        headers={"Idempotency-Key": key},
    )
    assert first.status == again.status == 201
    assert first.json["runId"] == again.json["runId"]
    assert again.headers.get("openwop-idempotent-replay") == "true"
    assert "openwop-idempotent-replay" not in first.headers
    other = raw(
        host.base_url,
        "POST",
        "/runs",
        {"workflowId": "conformance-multi-node"},
        key=host.key_a,
        headers={"Idempotency-Key": key},
    )
    assert other.status == 409 and other.json["error"] == "idempotency_key_mismatch"
    # The same key is a different record for another tenant
    b = raw(
        host.base_url,
        "POST",
        "/runs",
        {"workflowId": "conformance-noop"},
        key=host.key_b,
        headers={"Idempotency-Key": key},
    )
    assert b.status == 201 and b.json["runId"].startswith("tenant-b/")
    assert client.runs_get(first.json["runId"]).runId == first.json["runId"]


def test_bad_idempotency_key_is_400(host):
    r = raw(
        host.base_url,
        "POST",
        "/runs",
        {"workflowId": "conformance-noop"},
        key=host.key_a,
        headers={"Idempotency-Key": "short"},
    )
    assert r.status == 400 and r.json["error"] == "idempotency_key_invalid"


def test_dedup_enforce_refuses_a_second_active_run_for_a_scope(host):
    from tests.helpers import unique

    scope = unique("scope")
    body = {"workflowId": "conformance-replay-side-effect", "inputs": {"delayMs": 20000}, "scopeId": scope}
    # a refused create does not hold the scope
    bad = raw(
        host.base_url,
        "POST",
        "/runs",
        {**body, "inputs": {"delayMs": "x"}},
        key=host.key_a,
        headers={"OpenWOP-Dedup": "enforce"},
    )
    assert bad.status == 400
    first = raw(host.base_url, "POST", "/runs", body, key=host.key_a, headers={"OpenWOP-Dedup": "enforce"})
    assert first.status == 201
    second = raw(host.base_url, "POST", "/runs", body, key=host.key_a, headers={"OpenWOP-Dedup": "enforce"})
    assert second.status == 409 and second.json["error"] == "run_already_active" and second.headers["retry-after"]
    # without the header, or for another tenant, nothing is refused
    assert (
        raw(host.base_url, "POST", "/runs", {"workflowId": "conformance-noop", "scopeId": scope}, key=host.key_a).status
        == 201
    )
    assert raw(host.base_url, "POST", "/runs", body, key=host.key_b, headers={"OpenWOP-Dedup": "enforce"}).status == 201
    # once the active run ends, the scope is free again
    client = host.client(host.key_a)
    client.runs_cancel(first.json["runId"])
    third = raw(
        host.base_url,
        "POST",
        "/runs",
        {**body, "inputs": {"delayMs": 10}},
        key=host.key_a,
        headers={"OpenWOP-Dedup": "enforce"},
    )
    assert third.status == 201
    for r in (third.json["runId"],):
        wait_terminal(client, r)


def test_sse_buffered_batches_are_flattened_by_the_client(host):
    client = host.client(host.key_a)
    created = client.runs_create(CreateRunRequest(workflowId="conformance-multi-node"))
    wait_terminal(client, created.runId)
    wire = created.runId.replace("/", "~2F")
    r = raw(
        host.base_url,
        "GET",
        f"/runs/{wire}/events?bufferMs=200&streamMode=debug",
        key=host.key_a,
        headers={"Accept": "text/event-stream"},
    )
    assert r.status == 200 and "event: batch" in r.text and "id: 7" in r.text
    got = [
        e.sequence for e in client.runs_events(created.runId, stream_mode="debug", buffer_ms=200, timeout_seconds=20)
    ]
    assert got == list(range(8))


def test_sse_values_mode_sends_snapshots(host):
    client = host.client(host.key_a)
    created = client.runs_create(CreateRunRequest(workflowId="conformance-noop"))
    wait_terminal(client, created.runId)
    wire = created.runId.replace("/", "~2F")
    r = raw(
        host.base_url,
        "GET",
        f"/runs/{wire}/events?streamMode=values",
        key=host.key_a,
        headers={"Accept": "text/event-stream", "Last-Event-ID": "1"},
    )
    frames = [f for f in r.text.split("\n\n") if f.startswith("id:")]
    assert frames and all("event: state.snapshot" in f for f in frames)
    assert json.loads(frames[0].split("data: ", 1)[1])["runId"] == created.runId
