"""The MCP invoke seam (``POST /conformance/seams/sample/mcp/invoke``, seams profile) as ``v2-minimum-version-refused``
and ``v2-negotiation-decided-emitted`` drive it, and the ``conformance-mcp-client`` fixture (``ctx.mcp``) as
``v2-mcp-client-results`` drives it: each against real loopback MCP servers (the ``mcp`` SDK's server), each result
compared with the JSON-RPC result the server recorded sending."""

from __future__ import annotations

import datetime
import hashlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from openwop_client.types import CreateRunRequest, ForkRunRequest

from shared.engine import negotiation
from shared.local.demo_mcp import DemoMcpServer
from shared.protocol.ids import project_id
from tests.wire import all_events, raw, wait_terminal

INVOKE = "/conformance/seams/sample/mcp/invoke"
BASE = "/host/openwop-serverless"
REVISION = "2026-07-28"
FIXTURE = "conformance-mcp-client"
SESSION_WORDS = ("connected", "disconnected")


def _structured_echo(args: dict[str, Any]) -> Any:
    import mcp_types as types

    nonce = str(args.get("nonce", ""))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=nonce)],
        structured_content={"nonce": nonce},
        _meta={"dev.openwop.conformance/nonce": nonce},
    )


ECHO = {
    "name": "structured-echo",
    "description": "Echoes a nonce, in _meta too.",
    "inputSchema": {"type": "object", "properties": {"nonce": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def servers(host) -> Iterator[dict[str, DemoMcpServer]]:
    """tenant A's ``conformance`` (the pinned revision), ``conformance-old`` (2025-11-25 only), ``conformance-down``
    (registered while it answered, then stopped: an address nothing answers)."""
    up = DemoMcpServer(extra_tools=[(ECHO, _structured_echo)])
    old = DemoMcpServer(revisions=("2025-11-25",))
    down = DemoMcpServer()
    for s in (up, old, down):
        s.start()
    reg = {"conformance": up.url, "conformance-down": down.url}
    for sid, url in reg.items():
        r = raw(host.base_url, "POST", f"{BASE}/mcp-servers", {"serverId": sid, "url": url}, key=host.key_a)
        assert r.status in (200, 201), r.text
    down.stop()
    # conformance-old: registered while a server of the revision answered on its port
    port = old.port
    old.stop()
    with DemoMcpServer(port=port) as briefly:
        assert raw(
            host.base_url,
            "POST",
            f"{BASE}/mcp-servers",
            {"serverId": "conformance-old", "url": briefly.url},
            key=host.key_a,
        ).status in (200, 201)
    old = DemoMcpServer(port=port, revisions=("2025-11-25",))
    old.start()
    yield {"up": up, "old": old}
    up.stop()
    old.stop()


def _digest(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return hashlib.sha256(f"{scheme}://{rest.split('/')[0]}".encode()).hexdigest()


def _decided(host: Any, run_id: str) -> list[dict[str, Any]]:
    r = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/events/poll?timeout=1", key=host.key_a)
    assert r.status == 200, r.text
    return [e["payload"] for e in r.json["events"] if e["type"] == "negotiation.decided"]


# --------------------------------------------------------------------------- the invoke seam


def test_a_revision_below_the_floor_is_refused_with_its_audit_run_and_never_sent(host):
    # Given a server that speaks only 2025-06-18 (v2-minimum-version-refused's server)
    with DemoMcpServer(revisions=("2025-06-18",)) as low:
        # When the seam asks the host to negotiate 2025-06-18 with it
        r = raw(host.base_url, "POST", INVOKE, {"serverUrl": low.url, "requestVersion": "2025-06-18"}, key=host.key_a)
        # Then it is refused 400 interop_version_unsupported, naming the protocol and the audit run
        assert (r.status, r.json["error"]) == (400, "interop_version_unsupported"), r.text
        assert (r.json["details"]["protocol"], r.json["details"]["reason"]) == ("mcp", "below-floor")
        # and nothing went to the server: a revision below the floor is never put on the wire
        assert low.exchanges == [] and low.hosts == []
    [decided] = _decided(host, r.json["details"]["runId"])
    assert (decided["outcome"], decided["reason"], decided["floor"]) == ("refused", "below-floor", REVISION)
    assert decided["peerDigest"] == _digest(low.url)


def test_a_server_of_an_older_revision_is_refused_after_the_probe(host):
    with DemoMcpServer(revisions=("2025-06-18",)) as low:
        r = raw(host.base_url, "POST", INVOKE, {"serverUrl": low.url}, key=host.key_a)
        assert (r.status, r.json["error"], r.json["details"]["reason"]) == (
            400,
            "interop_version_unsupported",
            "below-floor",
        )
        assert [(x["method"], x["protocolVersion"]) for x in low.exchanges] == [("server/discover", REVISION)]
    assert [d["outcome"] for d in _decided(host, r.json["details"]["runId"])] == ["refused"]


@pytest.mark.parametrize("authenticated", [None, False])
def test_an_accepted_exchange_answers_its_run_and_version_and_calls_the_tool_unaltered(host, servers, authenticated):
    up = servers["up"]
    up.reset()
    nonce = uuid.uuid4().hex
    body: dict[str, Any] = {"serverUrl": up.url, "tool": "structured-echo", "arguments": {"nonce": nonce}}
    if authenticated is not None:
        body["authenticated"] = authenticated  # unauthenticated: still never lowered (there is nothing to lower)
    r = raw(host.base_url, "POST", INVOKE, body, key=host.key_a)
    assert r.status == 200, r.text
    assert (r.json["protocol"], r.json["negotiatedVersion"], r.json["peerDigest"]) == ("mcp", REVISION, _digest(up.url))
    sent = {x["method"]: x for x in up.exchanges}
    assert r.json["discover"] == sent["server/discover"]["result"]
    assert r.json["result"] == sent["tools/call"]["result"]
    assert r.json["result"]["_meta"]["dev.openwop.conformance/nonce"] == nonce
    assert {x["protocolVersion"] for x in up.exchanges} == {REVISION}
    [decided] = _decided(host, r.json["runId"])
    assert (decided["outcome"], decided["version"]) == ("accepted", r.json["negotiatedVersion"])


@pytest.mark.parametrize(
    "body, at",
    [
        ({"serverUrl": "http://127.0.0.1:1/mcp", "extra": 1}, "/extra"),
        ({"serverUrl": "file:///etc/passwd"}, "/serverUrl"),
        ({}, "/serverUrl"),
        ({"serverUrl": "http://127.0.0.1:1/mcp", "arguments": [1]}, "/arguments"),
    ],
)
def test_bodies_outside_the_contract_are_400_with_nothing_written(host, body, at):
    r = raw(host.base_url, "POST", INVOKE, body, key=host.key_a)
    assert (r.status, r.json["error"]) == (400, "validation_error"), r.text
    assert [e["pointer"] for e in r.json["details"]["errors"]][0] == at
    assert "runId" not in r.json["details"]


def test_a_server_that_does_not_answer_is_400_without_an_audit_run(host, servers):
    r = raw(host.base_url, "POST", INVOKE, {"serverUrl": "http://127.0.0.1:1/mcp"}, key=host.key_a)
    assert (r.status, r.json["error"]) == (400, "validation_error") and "runId" not in r.json["details"]


def test_another_tenant_cannot_read_the_seams_audit_run(host, servers):
    r = raw(host.base_url, "POST", INVOKE, {"serverUrl": servers["up"].url}, key=host.key_a)
    got = raw(host.base_url, "GET", f"/runs/{project_id(r.json['runId'])}/events/poll?timeout=1", key=host.key_b)
    assert (got.status, got.json["error"]) == (403, "id_tenant_mismatch")


# --------------------------------------------------------------------------- the ctx.mcp fixture


def _run(host: Any, inputs: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """Run the fixture; (run id, status, the node's terminal payload)."""
    client = host.client(host.key_a)
    run_id = client.runs_create(CreateRunRequest(workflowId=FIXTURE, inputs=inputs)).runId
    status = wait_terminal(client, run_id).status
    events = all_events(client, run_id)
    terminal = next(e for e in events if e.type in ("node.completed", "node.failed") and e.nodeId == "mcp-client")
    return run_id, status, {"type": terminal.type, **terminal.payload}


def _last(server: DemoMcpServer, method: str) -> dict[str, Any]:
    return next(x for x in reversed(server.exchanges) if x["method"] == method)


def test_the_fixture_is_advertised_and_seeded(host):
    doc = raw(host.base_url, "GET", "/.well-known/openwop").json
    # (listed while the mcp facet's review is fresh: tests/integration/test_mcp_negotiation.py checks both edges)
    fresh = negotiation.facet(datetime.datetime.now(datetime.UTC).isoformat()) is not None
    assert (FIXTURE in doc["fixtures"], doc.get("mcp", {}).get("client")) == ((True, True) if fresh else (False, None))
    assert raw(host.base_url, "GET", f"/workflows/{FIXTURE}", key=host.key_a).status == 200


def test_call_tool_resolves_the_servers_call_tool_result_unaltered_meta_included(host, servers):
    up = servers["up"]
    nonce = uuid.uuid4().hex
    run_id, status, out = _run(
        host,
        {"method": "callTool", "serverId": "conformance", "name": "structured-echo", "arguments": {"nonce": nonce}},
    )
    assert status == "completed" and out["type"] == "node.completed"
    sent = _last(up, "tools/call")
    assert sent["params"]["arguments"] == {"nonce": nonce}
    assert out["outputs"]["result"] == sent["result"]
    assert out["outputs"]["result"]["_meta"]["dev.openwop.conformance/nonce"] == nonce
    # negotiated once, right before the node's outcome
    types = [e.type for e in all_events(host.client(host.key_a), run_id)]
    assert types[types.index("node.started") : types.index("node.completed") + 1] == [
        "node.started",
        "negotiation.decided",
        "node.completed",
    ]


def test_call_tool_resolves_an_is_error_result(host, servers):
    _, status, out = _run(host, {"method": "callTool", "serverId": "conformance", "name": "fail_always"})
    assert status == "completed"
    result = out["outputs"]["result"]
    assert result["isError"] is True and result == _last(servers["up"], "tools/call")["result"]


def test_list_tools_resolves_one_page_unaltered_and_forwards_the_cursor(host, servers):
    up = servers["up"]
    _, status, first = _run(host, {"method": "listTools", "serverId": "conformance"})
    page = first["outputs"]["result"]
    assert status == "completed" and page == _last(up, "tools/list")["result"]
    assert len(page["tools"]) == 2 and isinstance(page["nextCursor"], str)
    assert any("outputSchema" in t and "annotations" in t for t in page["tools"])
    _, status, second = _run(host, {"method": "listTools", "serverId": "conformance", "cursor": page["nextCursor"]})
    sent = _last(up, "tools/list")
    assert sent["params"]["cursor"] == page["nextCursor"]
    assert status == "completed" and second["outputs"]["result"] == sent["result"]
    assert "nextCursor" not in second["outputs"]["result"]


def test_read_resource_resolves_the_result_unaltered(host, servers):
    _, status, out = _run(host, {"method": "readResource", "serverId": "conformance", "uri": "demo://greeting"})
    assert status == "completed"
    assert out["outputs"]["result"] == _last(servers["up"], "resources/read")["result"]


def test_server_health_reports_reachability_from_server_discover_never_a_session(host, servers):
    _, status, up = _run(host, {"method": "serverHealth", "serverId": "conformance"})
    assert status == "completed"
    assert up["outputs"]["result"] == {
        "state": "reachable",
        "discover": _last(servers["up"], "server/discover")["result"],
    }
    assert up["outputs"]["result"]["discover"]["supportedVersions"] == [REVISION]
    run_id, _, down = _run(host, {"method": "serverHealth", "serverId": "conformance-down"})
    assert down["outputs"]["result"] == {"state": "unreachable"}
    assert _decided(host, run_id) == []  # no answer: nothing negotiated
    run_id, _, old = _run(host, {"method": "serverHealth", "serverId": "conformance-old"})
    assert old["outputs"]["result"] == {"state": "incompatible"}
    assert [(d["outcome"], d["reason"]) for d in _decided(host, run_id)] == [("refused", "below-floor")]
    for got in (up, down, old):
        assert not any(f'"{w}"' in str(got["outputs"]).replace("'", '"') for w in SESSION_WORDS)


def test_a_call_to_a_server_of_an_older_revision_fails_the_node_and_sends_nothing(host, servers):
    old = servers["old"]
    old.reset()
    _, status, out = _run(
        host, {"method": "callTool", "serverId": "conformance-old", "name": "lookup_customer", "arguments": {"id": "x"}}
    )
    assert (status, out["type"], out["error"]["code"]) == ("failed", "node.failed", "interop_version_unsupported")
    assert [x["method"] for x in old.exchanges] == ["server/discover"] and old.calls == {}


def test_an_unknown_server_id_fails_the_node_not_found(host, servers):
    _, status, out = _run(
        host,
        {
            "method": "callTool",
            "serverId": f"no-such-{uuid.uuid4().hex[:8]}",
            "name": "echo",
            "arguments": {"text": "x"},
        },
    )
    assert (status, out["type"], out["error"]["code"]) == ("failed", "node.failed", "not_found")
    # another tenant's server is as unknown as no server
    client_b = host.client(host.key_b)
    run_id = client_b.runs_create(CreateRunRequest(workflowId=FIXTURE, inputs={"serverId": "conformance"})).runId
    assert wait_terminal(client_b, run_id).status == "failed"
    failed = next(e for e in all_events(client_b, run_id) if e.type == "node.failed")
    assert failed.payload["error"]["code"] == "not_found"


def test_a_replay_fork_of_a_fixture_run_serves_its_recorded_negotiation_with_zero_hits(host, servers):
    up = servers["up"]
    client = host.client(host.key_a)
    source, status, _ = _run(
        host,
        {
            "method": "callTool",
            "serverId": "conformance",
            "name": "create_ticket",
            "arguments": {"title": "t", "body": "b"},
        },
    )
    assert status == "completed"
    up.reset()
    fork = client.runs_fork(source, ForkRunRequest(fromSeq=0, mode="replay"))
    assert wait_terminal(client, fork.runId).status == "completed"
    src, got = all_events(client, source), all_events(client, fork.runId)
    assert [(e.type, e.nodeId, e.payload) for e in got] == [(e.type, e.nodeId, e.payload) for e in src]
    assert "negotiation.decided" in [e.type for e in got]
    assert up.exchanges == [] and up.calls == {}
