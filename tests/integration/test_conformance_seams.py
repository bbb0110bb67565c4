"""The conformance seams profile (api/seams-v2.yaml) on the local host: an era-2 log seeded and read through the
codemap, its fork, the effect-seam fire seam and the effect ledger a replay fork is read against; and the profile
refusing everything when its setting is off."""

from __future__ import annotations

import json

import pytest
from openwop_client.types import ForkRunRequest

from shared.protocol.ids import project_id
from tests.helpers import eventually
from tests.wire import raw, wait_terminal

SEED = "/conformance/seams/sample/event-log/seed"
FIRE = "/conformance/seams/sample/effect-seams/fire"
LEGACY = "urn:openwop:legacy"


def _ports():
    from shared.wiring import get_ports

    return get_ports()


def _v1_log(workflow_id: str = "conformance-noop") -> list[dict]:
    return [
        {
            "type": "run.started",
            "sequence": 0,
            "payload": {"workflowId": workflow_id},
            "timestamp": "2026-01-15T10:00:00.000Z",
        },
        {
            "type": "agent.toolCalled",
            "sequence": 1,
            "timestamp": "2026-01-15T10:00:01.000Z",
            "payload": {"agentId": "conformance-agent", "toolName": "echo", "callId": "call-0001"},
        },
        {
            "type": "agent.toolReturned",
            "sequence": 2,
            "timestamp": "2026-01-15T10:00:02.000Z",
            "payload": {"agentId": "conformance-agent", "toolName": "echo", "callId": "call-0001", "status": "ok"},
        },
        {
            "type": "run.completed",
            "sequence": 3,
            "payload": {"durationMs": 3000},
            "timestamp": "2026-01-15T10:00:03.000Z",
        },
    ]


def _seed(host, events: list[dict], status: str = "completed", key: str | None = None):
    return raw(
        host.base_url,
        "POST",
        SEED,
        {"eventLogSchemaVersion": 2, "status": status, "events": events},
        key=key or host.key_a,
    )


def _poll(host, run_id: str, key: str | None = None):
    return raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/events/poll?timeout=1", key=key or host.key_a)


def _observable(e: dict) -> str:
    return json.dumps({"type": e["type"], "sequence": e["sequence"], "payload": e["payload"]}, sort_keys=True)


def test_discovery_advertises_the_seams_profile_where_it_is_served(host):
    # When discovery is read on the local host (the seams setting is on there)
    doc = raw(host.base_url, "GET", "/.well-known/openwop").json
    # Then it names the profile, and nothing else in the conformance block
    assert doc["conformance"] == {"seamsProfile": "openwop-conformance-seams-v2"}


def test_a_seeded_era_2_log_is_stored_verbatim_and_read_through_the_codemap(host):
    # Given a run seeded in v1 vocabulary
    seeded = _seed(host, _v1_log())
    assert seeded.status == 201, seeded.text
    run_id = seeded.json["runId"]
    assert set(seeded.json) == {"runId"}
    # Then the stored rows keep their v1 types (no write-time translation) and carry the era
    items = _ports().events._c.query(
        TableName=_ports().settings.events_table,
        KeyConditionExpression="runId = :r",
        ExpressionAttributeValues={":r": {"S": run_id}},
    )["Items"]
    assert [json.loads(i["doc"]["S"])["type"] for i in items] == [
        "run.started",
        "agent.toolCalled",
        "agent.toolReturned",
        "run.completed",
    ]
    assert {i["era"]["N"] for i in items} == {"2"}
    # And the snapshot reads era 2 with the caller's legacy Subject
    snap = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}", key=host.key_a).json
    assert snap["eventLogSchemaVersion"] == 2 and snap["status"] == "completed"
    assert snap["owner"]["subject"]["issuer"] == LEGACY
    assert snap["owner"]["subject"]["tenant"] == host.tenant_a
    # And poll reads every row translated, sequence and timestamps verbatim, run.started legacy-stamped
    page = _poll(host, run_id)
    assert page.status == 200
    events = page.json["events"]
    assert [(e["type"], e["sequence"]) for e in events] == [
        ("run.started", 0),
        ("agent.tool-called", 1),
        ("agent.tool-returned", 2),
        ("run.completed", 3),
    ]
    assert events[1]["timestamp"] == "2026-01-15T10:00:01.000Z"
    assert events[1]["payload"] == _v1_log()[1]["payload"]
    assert events[0]["payload"]["owner"] == snap["owner"]
    # And a second read is the same bytes (stamped at first read, never rewritten)
    assert _poll(host, run_id).json["events"] == events


def test_the_fork_of_an_era_2_run_copies_the_translated_prefix_and_the_legacy_subject(host):
    client = host.client(host.key_a)
    run_id = _seed(host, _v1_log()).json["runId"]
    parent = _poll(host, run_id).json["events"]
    # When it is forked in replay mode at its last sequence
    fork = client.runs_fork(run_id, ForkRunRequest(mode="replay", fromSeq=3))
    assert fork.sourceRunId == run_id
    child = eventually(
        lambda: (lambda ev: ev if len(ev) >= 3 else None)(_poll(host, fork.runId).json["events"]), timeout=20
    )
    # Then its prefix [0, 3) is byte-equivalent to the translated parent, legacy Subject included
    assert [_observable(e) for e in child[:3]] == [_observable(e) for e in parent[:3]]
    assert child[0]["payload"]["owner"]["subject"]["issuer"] == LEGACY
    # And the fork is an era-3 run (its log is written in v2 vocabulary)
    snap = wait_terminal(client, fork.runId, timeout=30)
    assert (
        raw(host.base_url, "GET", f"/runs/{project_id(snap.runId)}", key=host.key_a).json["eventLogSchemaVersion"] == 3
    )


def test_an_unmapped_v1_type_fails_the_read_with_event_type_unmapped(host):
    # Given a seeded log with a type the codemap does not name
    run_id = _seed(
        host,
        [{"type": "run.started", "sequence": 0, "payload": {}}, {"type": "bogus.thing", "sequence": 1, "payload": {}}],
        status="running",
    ).json["runId"]
    # When it is read, then the read fails closed with the registered code, naming no stored content
    got = _poll(host, run_id)
    assert got.status == 500
    assert got.json["error"] == "event_type_unmapped" and "bogus" not in got.text


@pytest.mark.parametrize(
    "body",
    [
        {
            "eventLogSchemaVersion": 3,
            "status": "completed",
            "events": [{"type": "run.started", "sequence": 0, "payload": {}}],
        },
        {
            "eventLogSchemaVersion": 2,
            "status": "paused",
            "events": [{"type": "run.started", "sequence": 0, "payload": {}}],
        },
        {"eventLogSchemaVersion": 2, "status": "completed", "events": []},
        {
            "eventLogSchemaVersion": 2,
            "status": "completed",
            "events": [{"type": "run.started", "sequence": -1, "payload": {}}],
        },
        {
            "eventLogSchemaVersion": 2,
            "status": "completed",
            "events": [{"type": "run.started", "sequence": 0, "payload": {}, "extra": 1}],
        },
        {
            "eventLogSchemaVersion": 2,
            "status": "completed",
            "events": [{"type": "run.started", "sequence": 0, "payload": {}, "timestamp": "yesterday"}],
        },
        {
            "eventLogSchemaVersion": 2,
            "status": "completed",
            "events": [
                {"type": "run.started", "sequence": 0, "payload": {}},
                {"type": "run.completed", "sequence": 0, "payload": {}},
            ],
        },
    ],
)
def test_a_seed_body_outside_the_contract_is_400_and_stores_nothing(host, body):
    before = len(_ports().runs.list_runs(host.tenant_b, 100, None, {}).runs)
    got = raw(host.base_url, "POST", SEED, body, key=host.key_b)
    assert got.status == 400 and got.json["error"] == "validation_error"
    assert len(_ports().runs.list_runs(host.tenant_b, 100, None, {}).runs) == before


def test_seeded_runs_stay_in_their_tenant(host):
    run_id = _seed(host, _v1_log()).json["runId"]
    # When tenant B reads tenant A's seeded run, then it is refused as any foreign id
    got = _poll(host, run_id, key=host.key_b)
    assert got.status == 403 and got.json["error"] == "id_tenant_mismatch"
    assert (
        raw(
            host.base_url, "POST", SEED, {"eventLogSchemaVersion": 2, "status": "completed", "events": _v1_log()}
        ).status
        == 401
    )


def test_firing_http_fetch_claims_one_effect_and_its_replay_fork_claims_none(host):
    client = host.client(host.key_a)
    # When the first manifest row is fired (no receiverUrl: the unreachable fixture destination)
    fired = raw(host.base_url, "POST", FIRE, {"seam": "http.fetch"}, key=host.key_a)
    assert fired.status == 201, fired.text
    run_id = fired.json["runId"]
    # Then the run has settled: the request was claimed, then refused by nothing listening
    snap = client.runs_get(run_id)
    assert snap.status == "failed"
    effects = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/effects", key=host.key_a).json
    assert effects["runId"] == run_id
    assert [(e["nodeId"], e["attempt"], e["state"], e["keying"]) for e in effects["effects"]] == [
        ("fire", 1, "claimed", "activity-recipe")
    ]
    # And its replay fork resolves the node from the source and claims nothing
    # (the suite's request: mode only, fromSeq defaulted)
    fork = raw(host.base_url, "POST", f"/runs/{project_id(run_id)}:fork", {"mode": "replay"}, key=host.key_a).json
    assert wait_terminal(client, fork["runId"], timeout=30).status == "failed"
    forked = raw(host.base_url, "GET", f"/runs/{project_id(fork['runId'])}/effects", key=host.key_a).json
    assert forked == {"runId": fork["runId"], "effects": []}


def test_firing_the_effect_ledger_seam_writes_one_ledger_row(host):
    fired = raw(host.base_url, "POST", FIRE, {"seam": "storage.effect-ledger"}, key=host.key_a)
    assert fired.status == 201
    run_id = fired.json["runId"]
    assert host.client(host.key_a).runs_get(run_id).status == "completed"
    effects = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/effects", key=host.key_a).json["effects"]
    assert [(e["nodeId"], e["state"]) for e in effects] == [("fire", "completed")]
    assert len(_ports().host.query(f"LEDGER#{host.tenant_a}", f"{run_id}#")) == 1


def test_a_seam_path_is_served_with_post_only(host):
    got = raw(host.base_url, "GET", SEED, key=host.key_a)
    assert (got.status, got.json["error"], got.headers.get("allow")) == (
        405,
        "openwop-serverless.method_not_allowed",
        "POST",
    )


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"seam": "no.such-seam"}, 404, "not_found"),
        ({"seam": "model.bedrock"}, 404, "not_found"),  # a manifest row no workflow node of this host drives
        ({"seam": "http.fetch", "extra": True}, 400, "validation_error"),
        ({}, 400, "validation_error"),
    ],
)
def test_fire_refusals(host, body, status, code):
    got = raw(host.base_url, "POST", FIRE, body, key=host.key_a)
    assert (got.status, got.json["error"]) == (status, code)


def test_effects_of_another_tenants_run_are_refused(host):
    run_id = raw(host.base_url, "POST", FIRE, {"seam": "storage.effect-ledger"}, key=host.key_a).json["runId"]
    got = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/effects", key=host.key_b)
    assert (got.status, got.json["error"]) == (403, "id_tenant_mismatch")


def test_with_the_setting_off_the_seams_answer_as_unserved_paths_and_are_not_advertised(host, monkeypatch):
    from shared.settings import get_settings

    # Given the setting off (a deployed stack without CDK context conformanceSeams)
    monkeypatch.setenv("OPENWOP_CONFORMANCE_SEAMS", "false")
    get_settings.cache_clear()
    try:
        unknown = raw(host.base_url, "POST", "/conformance/seams/sample/no-such-seam", {})
        seeded = raw(
            host.base_url,
            "POST",
            SEED,
            {"eventLogSchemaVersion": 2, "status": "completed", "events": _v1_log()},
            key=host.key_a,
        )
        anonymous = raw(host.base_url, "POST", FIRE, {"seam": "http.fetch"})
        mcp = raw(
            host.base_url,
            "POST",
            "/conformance/seams/sample/mcp/invoke",
            {"serverUrl": "http://127.0.0.1:1/mcp"},
            key=host.key_a,
        )
        other_method = raw(host.base_url, "GET", SEED, key=host.key_a)
        doc = raw(host.base_url, "GET", "/.well-known/openwop").json
    finally:
        monkeypatch.undo()  # the local stack's own value (true) comes back
        get_settings.cache_clear()
    # Then every seam is the 404 of a path never served, with or without a credential, and nothing is advertised
    assert (seeded.status, seeded.json) == (404, unknown.json)
    assert (anonymous.status, anonymous.json) == (404, unknown.json)
    assert (mcp.status, mcp.json) == (404, unknown.json)
    assert (other_method.status, other_method.json, "allow" in other_method.headers) == (404, unknown.json, False)
    assert "conformance" not in doc


def test_a_seeded_running_run_can_be_cancelled_and_its_log_still_reads(host):
    client = host.client(host.key_a)
    # Given a seeded era-2 run left running (no execution drives it)
    run_id = _seed(host, _v1_log()[:2], status="running").json["runId"]
    # When it is cancelled
    got = raw(host.base_url, "POST", f"/runs/{project_id(run_id)}/cancel", {}, key=host.key_a)
    # Then it ends cancelled and the whole log reads, the seeded rows translated and run.cancelled after them
    assert (got.status, got.json["status"]) == (200, "cancelled")
    assert client.runs_get(run_id).status == "cancelled"
    assert [e["type"] for e in _poll(host, run_id).json["events"]] == [
        "run.started",
        "agent.tool-called",
        "run.cancelled",
    ]
