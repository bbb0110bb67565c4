"""The agent gateway's writes per call, at the physical bound (decision 0149), counted at the wire: every DynamoDB
write request our clients send that names the session's run, through a botocore hook. A production tool call that
goes live is two (its ordinal with its effect's intent, before the tool runs; its record with its events, after);
a call decided without a tool (forbidden) is one; a model call is two (its ordinal; its model-call entry with its
``provider.usage``). Calls racing for the same ordinal each take one of their own, the tool hit once per call. A
session reads its tool's registration once a minute per warm process (decision 0194)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import pytest

from shared.engine.tools import key_of_call
from shared.protocol.ids import project_id
from tests.helpers import ports as _ports
from tests.wire import raw

BASE = "/host/openwop-serverless"
ORDER_KEY = f"{1:012d}"  # a session's agent.invocation-started is its second event
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
MCP = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


@contextmanager
def writes_naming(run_id: str, ops: set[str] = WRITES) -> Iterator[list[str]]:
    """The DynamoDB operations of ``ops`` (by default the writes) sent while inside whose request names ``run_id``
    (or any other text), from any thread."""
    ports = _ports()
    clients = {id(c.meta.events): c for c in (ports.runs._c, ports.events._c, ports.tool_calls._c, ports.host._c)}
    sent: list[str] = []
    needle = run_id.encode()

    def before(request: Any = None, event_name: str = "", **_: Any) -> None:
        op = event_name.rsplit(".", 1)[1]
        body = request.body if isinstance(request.body, bytes) else str(request.body or "").encode()
        if op in ops and needle in body:
            sent.append(op)

    for c in clients.values():
        c.meta.events.register("before-send.dynamodb.*", before)
    try:
        yield sent
    finally:
        for c in clients.values():
            c.meta.events.unregister("before-send.dynamodb.*", before)


@pytest.fixture(scope="module")
def session_of(host, server) -> Any:
    """A new production session of an external agent allowed the loopback HTTP lookup, bound to the mock model."""
    tool_server, url = server
    tool = f"gw{uuid.uuid4().hex[:6]}.crm:lookup"
    body = {
        "toolId": tool,
        "description": "lookup",
        "source": {"kind": "http", "url": url + "/crm/lookup"},
        "inputSchema": {"type": "object", "required": ["customerId"]},
    }
    r = raw(host.base_url, "POST", f"{BASE}/tools", body, key=host.key_a)
    assert r.status in (200, 201), r.text
    agent_id = f"w{uuid.uuid4().hex[:8]}.ext"
    version = {
        "version": "1.0.0",
        "runtime": {"kind": "external"},
        "model": {"provider": "mock", "model": "mock-model", "mockProvider": {"script": [{"text": "a"}] * 8}},
        "manifest": {
            "agentId": agent_id,
            "persona": "External",
            "modelClass": "general",
            "systemPrompt": "unused by an external agent",
            "toolAllowlist": [tool],
        },
    }
    r = raw(host.base_url, "POST", f"{BASE}/agents", version, key=host.key_a)
    assert r.status == 201, r.text

    def new() -> dict[str, Any]:
        r = raw(host.base_url, "POST", f"{BASE}/agents/{agent_id}/sessions", {"input": {"q": "w"}}, key=host.key_a)
        assert r.status == 201, r.text
        return {**r.json, "tool": tool, "server": tool_server}

    return new


def _tool(host: Any, s: dict[str, Any], name: str, args: Any, rpc: int = 1) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": rpc, "method": "tools/call", "params": {"name": name, "arguments": args}}
    r = raw(host.base_url, "POST", urlsplit(s["mcpUrl"]).path, message, key=s["token"], headers=MCP)
    assert r.status == 200, r.text
    return dict(r.json["result"])


def _model(host: Any, s: dict[str, Any]) -> dict[str, Any]:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    r = raw(host.base_url, "POST", urlsplit(s["openaiBaseUrl"]).path + "/chat/completions", body, key=s["token"])
    assert r.status == 200, r.text
    return dict(r.json)


def _events(host: Any, run_id: str) -> list[dict[str, Any]]:
    r = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/events/poll", key=host.key_a)
    assert r.status == 200, r.text
    return list(r.json["events"])


def test_a_live_tool_call_is_two_writes_its_intent_before_the_tool(host, session_of):
    s = session_of()
    hits = s["server"].count("/crm/lookup")
    # When the agent makes two live calls, one after the other
    with writes_naming(s["runId"]) as first:
        a = _tool(host, s, s["tool"], {"customerId": "c-1"})
    with writes_naming(s["runId"]) as second:
        b = _tool(host, s, s["tool"], {"customerId": "c-2"}, rpc=2)
    # Then each is two writes, the intent (ordinal and effect claim) and the outcome (record and events), each
    # one transaction, and the tool ran once per call
    assert first == ["TransactWriteItems", "TransactWriteItems"], first
    assert second == ["TransactWriteItems", "TransactWriteItems"], second
    assert s["server"].count("/crm/lookup") == hits + 2
    assert a["structuredContent"]["customerId"] == "c-1" and b["structuredContent"]["customerId"] == "c-2"
    # And what they wrote is what a host agent's calls leave: the effect ledger's row per call, the as-executed
    # records at ordinals 0 and 1, and the called/returned pairs in order on the log
    r = raw(host.base_url, "GET", f"/runs/{project_id(s['runId'])}/effects", key=host.key_a)
    assert r.status == 200, r.text
    keyed = sorted(e["effectId"].split("#call#", 1)[1] for e in r.json["effects"] if "#call#" in e["effectId"])
    assert keyed == [key_of_call(ORDER_KEY, 0), key_of_call(ORDER_KEY, 1)]
    records = _ports().tool_calls.list_calls(s["runId"])
    assert [(x.call_id, x.args, x.status, x.source) for x in records] == [
        ("s:0#0", {"customerId": "c-1"}, "ok", "live"),
        ("s:0#1", {"customerId": "c-2"}, "ok", "live"),
    ]
    calls = [(e["type"], e["payload"]["callId"]) for e in _events(host, s["runId"]) if "tool-" in e["type"]]
    assert calls == [
        ("agent.tool-called", "s:0#0"),
        ("agent.tool-returned", "s:0#0"),
        ("agent.tool-called", "s:0#1"),
        ("agent.tool-returned", "s:0#1"),
    ]


def test_a_session_reads_its_tool_s_registration_once_a_minute(host, session_of, monkeypatch):
    from shared.services.gateway import tools

    s = session_of()
    # When the session calls its tool twice within the minute
    with writes_naming(s["tool"], {"GetItem"}) as first:
        _tool(host, s, s["tool"], {"customerId": "c-1"})
    with writes_naming(s["tool"], {"GetItem"}) as second:
        _tool(host, s, s["tool"], {"customerId": "c-2"}, rpc=2)
    # Then its registration was read by the first call only (decision 0194)
    assert (first, second) == (["GetItem"], [])
    # And once the kept answer's life has passed, the next call reads it again
    monkeypatch.setattr(tools, "CATALOG_S", 0.0)
    with writes_naming(s["tool"], {"GetItem"}) as third:
        out = _tool(host, s, s["tool"], {"customerId": "c-1"}, rpc=3)
    assert third == ["GetItem"]
    assert out["structuredContent"]["customerId"] == "c-1"


def test_a_call_decided_without_the_tool_is_one_write(host, session_of):
    s = session_of()
    hits = s["server"].count("/crm/lookup")
    # When the agent calls a tool outside its allowlist
    with writes_naming(s["runId"]) as sent:
        result = _tool(host, s, "conformance.eval:echo", {"x": 1})
    # Then its ordinal, record and events are one write, and nothing was sent
    assert sent == ["TransactWriteItems"], sent
    assert result["isError"] is True and s["server"].count("/crm/lookup") == hits
    [rec] = _ports().tool_calls.list_calls(s["runId"])
    assert (rec.call_id, rec.status) == ("s:0#0", "forbidden")
    # And the next call takes the next ordinal
    _tool(host, s, s["tool"], {"customerId": "c-1"}, rpc=2)
    assert [x.call_id for x in _ports().tool_calls.list_calls(s["runId"])] == ["s:0#0", "s:0#1"]


def test_a_model_call_is_two_writes(host, session_of):
    s = session_of()
    # When the agent makes two model calls
    with writes_naming(s["runId"]) as sent:
        _model(host, s)
        _model(host, s)
    # Then each is its ordinal (one update) and its entry with its usage (one transaction)
    assert sent == ["UpdateItem", "TransactWriteItems"] * 2, sent
    usages = [e for e in _events(host, s["runId"]) if e["type"] == "provider.usage"]
    assert [u["payload"]["provider"] for u in usages] == ["mock", "mock"]


@contextmanager
def claims_held_together(run_id: str, n: int) -> Iterator[list[str]]:
    """Each of ``n`` threads' first effect claim on ``run_id`` waits until all ``n`` are about to claim (each read
    the same next ordinal), so all but one lose it; every claim sent is listed (its thread's name)."""
    barrier, passed, sent = threading.Barrier(n, timeout=60), set(), []
    needle = [run_id.encode(), b"EFFECT#call#"]

    def before(request: Any = None, **_: Any) -> None:
        body = request.body if isinstance(request.body, bytes) else str(request.body or "").encode()
        if not all(x in body for x in needle):
            return
        me = threading.get_ident()
        sent.append(threading.current_thread().name)
        if me not in passed:
            passed.add(me)
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                pass

    client = _ports().runs._c
    client.meta.events.register("before-send.dynamodb.TransactWriteItems", before)
    try:
        yield sent
    finally:
        client.meta.events.unregister("before-send.dynamodb.TransactWriteItems", before)


def test_calls_racing_for_an_ordinal_each_take_their_own(host, session_of):
    s = session_of()
    hits = s["server"].count("/crm/lookup")
    results: list[dict[str, Any]] = []
    args = [{"customerId": f"c-{1 + i % 2}"} for i in range(4)]
    # When four calls claim at once, each at the ordinal it read (0)
    threads = [
        threading.Thread(target=lambda i=i: results.append(_tool(host, s, s["tool"], args[i], i + 1))) for i in range(4)
    ]
    with claims_held_together(s["runId"], 4) as claims:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    # Then three lost the first claim and took later ordinals: each ran once, none twice
    assert len(claims) > 4, claims
    assert len(results) == 4 and not any(r.get("isError") for r in results), results
    assert s["server"].count("/crm/lookup") == hits + 4
    records = _ports().tool_calls.list_calls(s["runId"])
    assert [x.call_id for x in records] == [f"s:0#{i}" for i in range(4)]
    assert sorted(json.dumps(x.args) for x in records) == sorted(json.dumps(a) for a in args)
    r = raw(host.base_url, "GET", f"/runs/{project_id(s['runId'])}/effects", key=host.key_a)
    assert len([e for e in r.json["effects"] if "#call#" in e["effectId"]]) == 4
    # And the log holds each call's pair, in sequence with no gap
    events = _events(host, s["runId"])
    assert [e["sequence"] for e in events] == list(range(len(events)))
    pairs = sorted((e["type"], e["payload"]["callId"]) for e in events if "tool-" in e["type"])
    assert pairs == sorted((t, f"s:0#{i}") for i in range(4) for t in ("agent.tool-called", "agent.tool-returned"))
