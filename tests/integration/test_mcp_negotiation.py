"""MCP negotiated as a protocol, through the API on the local host against real loopback MCP servers (the ``mcp``
SDK's server, ``shared.local.demo_mcp``): the ``mcp`` facet, one ``negotiation.decided`` per negotiation where it is
decided (a registration's audit run, a run's own log right before the call's events), a server of an older revision
refused at registration and failed closed inside a run, a replay fork that re-emits the recorded negotiations with
no request to the server, and ``:diff`` reading a negotiation without its clock."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openwop_client.types import CreateRunRequest, ForkRunRequest

from shared.engine import negotiation
from shared.local.demo_mcp import DemoMcpServer
from shared.protocol.ids import project_id
from tests.wire import all_events, raw, wait_terminal
from tests.workflows import definition, node, run_script, static, tool_returned

BASE = "/host/openwop-serverless"
REVISION = "2026-07-28"
OLDER = ("2025-11-25",)
# schemas/v2/run-event-payloads.schema.json#/$defs/negotiationDecided (openwop/openwop, commit 11ad7804; the local
# spec digest's copy is the same): the closed, content-free payload.
NEGOTIATION_DECIDED = {
    "type": "object",
    "additionalProperties": False,
    "required": ["protocol", "outcome", "at"],
    "properties": {
        "protocol": {"type": "string", "enum": ["a2a", "mcp"]},
        "outcome": {"type": "string", "enum": ["accepted", "refused"]},
        "version": {"type": "string"},
        "floor": {"type": "string"},
        "peerDigest": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "reason": {"type": "string", "enum": ["below-floor", "unauthenticated", "unsupported", "ok"]},
        "at": {"type": "string", "format": "date-time"},
    },
}


def _ports():
    from shared.wiring import get_ports

    return get_ports()


@pytest.fixture(scope="module")
def current() -> Iterator[DemoMcpServer]:
    with DemoMcpServer() as server:
        yield server


@pytest.fixture
def mcp(current: DemoMcpServer) -> DemoMcpServer:
    current.reset()
    return current


def _digest(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return hashlib.sha256(f"{scheme}://{rest.split('/')[0]}".encode()).hexdigest()


def _payload_errors(p: dict[str, Any]) -> list[str]:
    return [e.message for e in Draft202012Validator(NEGOTIATION_DECIDED).iter_errors(p)]


def _register(host: Any, url: str) -> tuple[str, Any]:
    server_id = "s" + uuid.uuid4().hex[:8]
    return server_id, raw(
        host.base_url, "POST", f"{BASE}/mcp-servers", {"serverId": server_id, "url": url}, key=host.key_a
    )


def _poll(host: Any, run_id: str) -> list[dict[str, Any]]:
    r = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/events/poll?timeout=1", key=host.key_a)
    assert r.status == 200, r.text
    return list(r.json["events"])


def _decided(events: list[Any]) -> list[dict[str, Any]]:
    return [
        e.payload if hasattr(e, "payload") else e["payload"]
        for e in events
        if (e.type if hasattr(e, "type") else e["type"]) == "negotiation.decided"
    ]


# --------------------------------------------------------------------------- the facet


def test_the_mcp_facet_is_advertised_with_the_pinned_revision_and_validates(host):
    from tests.integration.test_conformance_profile import _capabilities_validator, _errors

    # When discovery is read
    doc = raw(host.base_url, "GET", "/.well-known/openwop").json
    if negotiation.facet(_ports().clock.iso()) is None:  # the review is stale (both edges are tested below): dropped
        assert "mcp" not in doc and "conformance-mcp-client" not in doc["fixtures"]
        return
    # Then the mcp facet names the one revision as offered, preferred and floor, reviewed within 90 days, as a client
    assert doc["mcp"] == {
        "status": "experimental",
        "since": "2.0",
        "until": "2027-12-31",
        "witness": "seam-gated",
        "revisions": [REVISION],
        "preferredVersion": REVISION,
        "minimumRevision": REVISION,
        "refreshedAt": negotiation.REFRESHED_AT,
        "client": True,
    }
    assert "conformance-mcp-client" in doc["fixtures"]
    # and the document validates, the facet alone too (as v2-legacy-profiles-absent checks it)
    assert _errors(_capabilities_validator(overlay=True), doc) == []
    alone = {"protocolVersions": ["2.0"], "preferredVersion": "2.0", "mcp": doc["mcp"]}
    assert _errors(_capabilities_validator(overlay=False), alone) == []
    assert _errors(_capabilities_validator(overlay=False), {**alone, "mcp": {**doc["mcp"], "client": False}}) != []


def test_discovery_drops_the_facet_and_the_fixture_once_the_review_is_stale(host):
    from shared.clock import SystemClock
    from shared.services import discovery

    class At(SystemClock):
        def __init__(self, day: datetime.date) -> None:
            self.ms = int(datetime.datetime(day.year, day.month, day.day, 12, tzinfo=datetime.UTC).timestamp() * 1000)

        def now_ms(self) -> int:
            return self.ms

    reviewed = datetime.date.fromisoformat(negotiation.REFRESHED_AT)
    # Given the host's own ports, on the last day of the window and on the day after it
    fresh = discovery.capabilities(dataclasses.replace(_ports(), clock=At(reviewed + datetime.timedelta(days=90))))
    stale = discovery.capabilities(dataclasses.replace(_ports(), clock=At(reviewed + datetime.timedelta(days=91))))
    # Then the facet and the ctx.mcp fixture are advertised within it, neither after it
    assert fresh["mcp"]["refreshedAt"] == negotiation.REFRESHED_AT and "conformance-mcp-client" in fresh["fixtures"]
    assert "mcp" not in stale and "conformance-mcp-client" not in stale["fixtures"]
    assert set(fresh["fixtures"]) - set(stale["fixtures"]) == {"conformance-mcp-client"}


# --------------------------------------------------------------------------- registration (no run: an audit run)


def test_registration_negotiates_once_and_its_audit_run_holds_the_accepted_outcome(host, mcp):
    # When an MCP server of the pinned revision is registered
    server_id, r = _register(host, mcp.url)
    assert r.status == 201, r.text
    audit = r.json["negotiation"]["runId"]
    assert r.json["negotiation"]["version"] == REVISION
    # Then the server saw one probe and the listing, all at the revision; never a handshake
    assert [x["method"] for x in mcp.exchanges] == ["server/discover", "tools/list", "tools/list"]
    assert {x["protocolVersion"] for x in mcp.exchanges} == {REVISION}
    # and the audit run, a completed run of the caller's tenant, holds the one content-free decision
    snap = raw(host.base_url, "GET", f"/runs/{project_id(audit)}", key=host.key_a).json
    assert (snap["status"], snap["workflowId"]) == ("completed", "openwop-serverless.negotiation-audit")
    events = _poll(host, audit)
    assert [e["type"] for e in events] == ["run.started", "negotiation.decided", "run.completed"]
    [decided] = _decided(events)
    assert _payload_errors(decided) == []
    assert {k: v for k, v in decided.items() if k != "at"} == {
        "protocol": "mcp",
        "outcome": "accepted",
        "version": REVISION,
        "floor": REVISION,
        "peerDigest": _digest(mcp.url),
        "reason": "ok",
    }
    assert "127.0.0.1" not in str(decided)
    # which another tenant cannot read, and which has no workflow to fork
    assert raw(host.base_url, "GET", f"/runs/{project_id(audit)}/events/poll?timeout=1", key=host.key_b).status in (
        403,
        404,
    )
    fork = raw(
        host.base_url, "POST", f"/runs/{project_id(audit)}:fork", {"mode": "replay", "fromSeq": 0}, key=host.key_a
    )
    assert (fork.status, fork.json["error"]) == (400, "validation_error")
    raw(host.base_url, "DELETE", f"{BASE}/mcp-servers/{server_id}", key=host.key_a)


def test_registration_of_a_server_of_an_older_revision_is_refused_and_audited(host):
    with DemoMcpServer(revisions=OLDER) as old:
        # When a server that speaks only 2025-11-25 is registered
        server_id, r = _register(host, old.url)
        # Then the registration is refused, naming the reason, the revisions and the audit run
        assert r.status == 400, r.text
        assert r.json["error"] == "interop_version_unsupported"
        details = r.json["details"]
        assert {
            k: details[k] for k in ("protocol", "requested", "supported", "reason", "serverSupported", "retriable")
        } == {
            "protocol": "mcp",
            "requested": REVISION,
            "supported": [REVISION],
            "reason": "below-floor",
            "serverSupported": list(OLDER),
            "retriable": False,
        }
        # and the server got the probe only: nothing was sent at another revision
        assert [(x["method"], x["protocolVersion"]) for x in old.exchanges] == [("server/discover", REVISION)]
    [decided] = _decided(_poll(host, details["runId"]))
    assert _payload_errors(decided) == []
    assert (decided["outcome"], decided["reason"], decided["floor"]) == ("refused", "below-floor", REVISION)
    assert "version" not in decided
    # nothing was stored
    assert server_id not in raw(host.base_url, "GET", f"{BASE}/mcp-servers", key=host.key_a).text


def test_a_server_that_does_not_answer_negotiated_nothing(host):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    audits = "/runs?workflowId=openwop-serverless.negotiation-audit&limit=100"
    before = len(raw(host.base_url, "GET", audits, key=host.key_a).json["runs"])
    # When a server is registered at a closed port
    _, r = _register(host, f"http://127.0.0.1:{port}/mcp")
    # Then there was no MCP answer, so no decision and no audit run: the registration is refused as unreachable
    assert (r.status, r.json["error"]) == (400, "validation_error")
    assert r.json["details"]["errors"][0]["pointer"] == "/url" and "runId" not in r.json["details"]
    assert len(raw(host.base_url, "GET", audits, key=host.key_a).json["runs"]) == before


# --------------------------------------------------------------------------- inside a run (the run's own log)


def test_each_mcp_call_of_a_run_is_negotiated_right_before_its_events(host, mcp):
    server_id, _ = _register(host, mcp.url)
    client = host.client(host.key_a)
    mcp.reset()
    # When a run's agent calls two MCP tools
    run_id = run_script(
        client, [(f"mcp:{server_id}.lookup_customer", {"id": "c-1"}), (f"mcp:{server_id}.fail_always", {})]
    )
    events = all_events(client, run_id)
    types = [e.type for e in events]
    # Then each call's events follow its own negotiation.decided, and there is one per call
    starts = [i for i, t in enumerate(types) if t == "negotiation.decided"]
    assert len(starts) == 2
    for i in starts:
        assert types[i + 1 : i + 3] == ["agent.tool-called", "agent.tool-returned"]
    decided = _decided(events)
    assert all(_payload_errors(p) == [] for p in decided)
    assert [(p["outcome"], p["version"], p["peerDigest"]) for p in decided] == [
        ("accepted", REVISION, _digest(mcp.url))
    ] * 2
    # each negotiation is the probe the call made, and is kept with the call's record
    assert [x["method"] for x in mcp.exchanges].count("server/discover") == 2
    records = _ports().tool_calls.list_calls(run_id)
    assert [r.extra["negotiation"] for r in records] == decided


def test_a_call_to_a_server_of_an_older_revision_fails_closed_inside_the_run(host):
    # Given a server registered while it spoke the revision, replaced on its port by one of an older revision
    with DemoMcpServer() as up:
        server_id, r = _register(host, up.url)
        port = up.port
    assert r.status == 201
    with DemoMcpServer(port=port, revisions=OLDER) as old:
        client = host.client(host.key_a)
        # When a run calls one of its tools
        run_id = run_script(client, [(f"mcp:{server_id}.create_ticket", {"title": "t", "body": "b"})])
        # Then the call failed, closed: the server got the probe only, no tools/call at any revision
        assert [x["method"] for x in old.exchanges] == ["server/discover"]
        assert old.calls == {}
    events = all_events(client, run_id)
    types = [e.type for e in events]
    i = types.index("negotiation.decided")
    assert types[i : i + 3] == ["negotiation.decided", "agent.tool-called", "agent.tool-returned"]
    [decided] = _decided(events)
    assert (decided["outcome"], decided["reason"]) == ("refused", "below-floor") and "version" not in decided
    [returned] = tool_returned(client, run_id)
    assert (returned["status"], returned["error"]["code"]) == ("error", "interop_version_unsupported")


def _mcp_tool_workflow(tool: str) -> str:
    from shared.services.workflows import register_workflow

    wid = f"mcp-tool-{uuid.uuid4().hex[:10]}"
    return register_workflow(
        _ports(),
        "tenant-a",
        definition(wid, [node("call", "core.tool", config={"tool": tool}, inputs={"id": static("n-7")})]),
    )


def test_a_replay_fork_re_emits_the_recorded_negotiations_and_calls_the_server_zero_times(host, mcp):
    server_id, _ = _register(host, mcp.url)
    client = host.client(host.key_a)
    # Given a run whose agent made two MCP calls, and a run whose core.tool node made one
    agent_run = run_script(
        client,
        [
            (f"mcp:{server_id}.create_ticket", {"title": "a", "body": "b"}),
            (f"mcp:{server_id}.lookup_customer", {"id": "c-2"}),
        ],
    )
    node_run = client.runs_create(
        CreateRunRequest(workflowId=_mcp_tool_workflow(f"mcp:{server_id}.lookup_customer"))
    ).runId
    assert wait_terminal(client, node_run).status == "completed"
    mcp.reset()
    for source in (agent_run, node_run):
        # When each is forked in replay mode from its first event
        fork = client.runs_fork(source, ForkRunRequest(fromSeq=0, mode="replay"))
        assert wait_terminal(client, fork.runId).status == "completed"
        # Then the fork's log is the source's, the negotiations as recorded (their `at` included), no divergence
        src, got = all_events(client, source), all_events(client, fork.runId)
        assert [(e.type, e.nodeId, e.payload) for e in got] == [(e.type, e.nodeId, e.payload) for e in src]
        assert len(_decided(got)) == (2 if source == agent_run else 1)
        diff = raw(
            host.base_url, "GET", f"/runs/{project_id(source)}:diff?against={project_id(fork.runId)}", key=host.key_a
        ).json
        assert (diff["divergedAtSeq"], diff["eventDiffs"]) == (None, [])
    # and the server saw no request at all: no probe, no listing, no call
    assert mcp.hosts == [] and mcp.exchanges == []
    node_events = all_events(client, node_run)
    assert [e.type for e in node_events][1:4] == ["node.started", "negotiation.decided", "node.completed"]
    assert node_events[2].nodeId == "call"


def test_diff_of_two_runs_reads_a_negotiation_without_its_clock(host, mcp):
    server_id, _ = _register(host, mcp.url)
    client = host.client(host.key_a)
    wid = _mcp_tool_workflow(f"mcp:{server_id}.lookup_customer")
    # Given two runs of the same workflow, each negotiating at its own instant
    a = client.runs_create(CreateRunRequest(workflowId=wid)).runId
    b = client.runs_create(CreateRunRequest(workflowId=wid)).runId
    wait_terminal(client, a)
    wait_terminal(client, b)
    pa, pb = _decided(all_events(client, a)), _decided(all_events(client, b))
    assert len(pa) == len(pb) == 1 and pa[0]["at"] != pb[0]["at"]
    # Then :diff finds nothing: the negotiations differ only in `at`, a clock field like a call's durationMs
    diff = raw(host.base_url, "GET", f"/runs/{project_id(a)}:diff?against={project_id(b)}", key=host.key_a).json
    assert (diff["divergedAtSeq"], diff["eventDiffs"]) == (None, []), diff["eventDiffs"][:1]  # what differed, if any
