"""The MCP client transport (shared.transports.mcp) against the demo MCP server on loopback.

Everything here talks to 127.0.0.1 only: an autouse guard fails any test whose process tries to connect a socket
to another address, and the egress tests also inject a connect layer that fails if it is reached at all.
"""

from __future__ import annotations

import concurrent.futures
import copy
import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from shared.local.demo_mcp import TOOLS, DemoMcpServer, ticket_id
from shared.ports import EgressRefusedError, McpDiscovery, TransportError
from shared.transports.egress import EgressPolicy
from shared.transports.mcp import McpSdkTransport

pytestmark = pytest.mark.timeout(60)

LOOPBACK = ["127.0.0.0/8", "::1/128"]
T = 5.0  # seconds: every call in this module is bounded by it
PROTOCOL_META = "io.modelcontextprotocol/"  # the 2026-07-28 protocol's own _meta keys (version, client info)
REVISION = "2026-07-28"
# A probe's result the exchanges below adopt without sending one (the probe itself is tested on its own)
ACCEPTED = McpDiscovery(REVISION, {"supportedVersions": [REVISION], "capabilities": {}}, (REVISION,))


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything in this process connects a socket to a non-loopback address."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def check(address: Any) -> None:
        if isinstance(address, tuple) and address and address[0] not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"connection to a non-loopback address: {address[0]}")

    def connect(self: socket.socket, address: Any) -> None:
        check(address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


@pytest.fixture(scope="module")
def server() -> Iterator[DemoMcpServer]:
    srv = DemoMcpServer(allowed_hosts=("mcp.test.invalid",))
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def demo(server: DemoMcpServer) -> DemoMcpServer:
    server.reset()
    return server


@pytest.fixture
def mcp() -> McpSdkTransport:
    return McpSdkTransport(EgressPolicy.from_entries(LOOPBACK))


def sent_meta(recorded: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in recorded.items() if not k.startswith(PROTOCOL_META)}


def refusing_connect(calls: list[tuple[str, int]]) -> Any:
    async def connect(address: str, port: int, timeout: float | None) -> Any:
        calls.append((address, port))
        raise AssertionError("the egress guard let a refused destination through to a connection")

    return connect


# --------------------------------------------------------------------------- listing


def test_list_tools_returns_every_page_unaltered_in_server_order(demo: DemoMcpServer, mcp: McpSdkTransport) -> None:
    # Given the demo server answering tools/list two tools per page
    # When the transport lists its tools
    tools = mcp.list_tools(demo.url, {}, discovered=ACCEPTED, timeout_s=T)
    # Then all three tools come back as the server sent them (schemas, annotations, title, _meta), in order
    assert tools == TOOLS
    assert demo.list_pages == 2
    assert demo.calls == {}


def test_list_tools_follows_one_tool_pages(mcp: McpSdkTransport) -> None:
    # Given a server that lists one tool per page
    with DemoMcpServer(page_size=1) as srv:
        # When the transport lists its tools
        tools = mcp.list_tools(srv.url, {}, discovered=ACCEPTED, timeout_s=T)
        # Then it followed nextCursor through three pages
        assert [t["name"] for t in tools] == ["lookup_customer", "create_ticket", "fail_always"]
        assert srv.list_pages == 3


def test_list_tools_stops_a_listing_that_never_ends(mcp: McpSdkTransport) -> None:
    # Given a server whose every page is empty and names a next cursor
    with DemoMcpServer(page_size=0) as srv:
        # When the transport lists its tools
        with pytest.raises(TransportError) as err:
            mcp.list_tools(srv.url, {}, discovered=ACCEPTED, timeout_s=30)
        # Then it gives up at the page bound
        assert "50 pages" in err.value.reason
        assert srv.list_pages == 50


def test_annotations_reach_the_listing_as_sent(demo: DemoMcpServer, mcp: McpSdkTransport) -> None:
    # Given tools that carry behaviour hints
    tools = {t["name"]: t for t in mcp.list_tools(demo.url, {}, discovered=ACCEPTED, timeout_s=T)}
    # Then the hints are there for the catalog to see (and ignore)
    assert tools["lookup_customer"]["annotations"] == {
        "title": "Customer lookup",
        "readOnlyHint": True,
        "openWorldHint": False,
    }
    assert tools["create_ticket"]["annotations"]["readOnlyHint"] is False
    assert "outputSchema" not in tools["fail_always"]


# --------------------------------------------------------------------------- calls


def test_call_tool_returns_the_result_unaltered(demo: DemoMcpServer, mcp: McpSdkTransport) -> None:
    # Given the demo server
    # When a read tool is called
    result = mcp.call_tool(demo.url, {}, "lookup_customer", {"id": "c-7"}, meta={}, discovered=ACCEPTED, timeout_s=T)
    # Then the CallToolResult comes back as sent: structured and text content, isError false
    expected = {"id": "c-7", "name": "Customer c-7", "tier": "gold"}
    assert result["structuredContent"] == expected
    assert result["content"] == [{"type": "text", "text": '{"id": "c-7", "name": "Customer c-7", "tier": "gold"}'}]
    assert result["isError"] is False
    assert demo.calls == {"lookup_customer": 1}


def test_call_tool_write_counts_one_hit_per_call(demo: DemoMcpServer, mcp: McpSdkTransport) -> None:
    # Given the demo server
    # When the write tool is called twice
    args = {"title": "Printer", "body": "It is on fire"}
    first = mcp.call_tool(demo.url, {}, "create_ticket", args, meta={}, discovered=ACCEPTED, timeout_s=T)
    second = mcp.call_tool(demo.url, {}, "create_ticket", args, meta={}, discovered=ACCEPTED, timeout_s=T)
    # Then both reached the server and the ticket id is the deterministic one
    assert (
        first["structuredContent"] == second["structuredContent"] == {"ticketId": ticket_id("Printer", "It is on fire")}
    )
    assert demo.calls["create_ticket"] == 2


def test_call_tool_error_result_is_a_result(demo: DemoMcpServer, mcp: McpSdkTransport) -> None:
    # Given a tool that always fails
    # When it is called
    result = mcp.call_tool(demo.url, {}, "fail_always", {}, meta={}, discovered=ACCEPTED, timeout_s=T)
    # Then the isError result comes back, not an exception
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "the demo tool always fails"}]
    assert demo.calls == {"fail_always": 1}


def test_call_tool_sends_meta_to_the_server(demo: DemoMcpServer, mcp: McpSdkTransport) -> None:
    # Given an idempotency key in the call's _meta
    meta = {"openwop/idempotencyKey": "run-1/call-7", "openwop/nested": {"a": [1, 2]}}
    # When the tool is called
    mcp.call_tool(
        demo.url,
        {},
        "create_ticket",
        {"title": "t", "body": "b"},
        meta=copy.deepcopy(meta),
        discovered=ACCEPTED,
        timeout_s=T,
    )
    # Then the server received exactly that _meta (beside the protocol's own keys)
    [(name, recorded)] = demo.metas
    assert name == "create_ticket"
    assert sent_meta(recorded) == meta


def test_call_tool_headers_reach_the_server_and_no_reason_or_log_names_them(
    demo: DemoMcpServer, mcp: McpSdkTransport, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a credential in the call's headers and a failing call
    caplog.set_level(logging.DEBUG)
    headers = {"Authorization": "Bearer sekrit-token-123"}
    # When the call fails at the server (a path it does not serve) and when the tool is unknown
    reasons = []
    for url, name in ((demo.url.replace("/mcp", "/elsewhere"), "lookup_customer"), (demo.url, "no_such_tool")):
        with pytest.raises(TransportError) as err:
            mcp.call_tool(url, headers, name, {}, meta={}, discovered=ACCEPTED, timeout_s=T)
        reasons.append(err.value.reason)
    # Then neither the reasons nor any log record carries the credential
    assert all("sekrit" not in r for r in reasons)
    assert all("sekrit" not in rec.getMessage() for rec in caplog.records)
    assert demo.calls == {}


def test_call_tool_unknown_tool_is_a_transport_error_without_a_call(demo: DemoMcpServer, mcp: McpSdkTransport) -> None:
    # Given the demo server, which has no tool named "drop_tables"
    # When it is called
    with pytest.raises(TransportError) as err:
        mcp.call_tool(demo.url, {}, "drop_tables", {}, meta={}, discovered=ACCEPTED, timeout_s=T)
    # Then it is a TransportError naming the tool, and no tools/call reached the server
    assert "drop_tables" in err.value.reason
    assert demo.calls == {} and demo.metas == []


def test_server_error_carries_the_mcp_code(demo: DemoMcpServer, mcp: McpSdkTransport) -> None:
    # Given a URL the server answers with HTTP 404 (the SDK's METHOD_NOT_FOUND)
    with pytest.raises(TransportError) as err:
        mcp.list_tools(demo.url.replace("/mcp", "/nothing-here"), {}, discovered=ACCEPTED, timeout_s=T)
    # Then the reason carries the MCP error code
    assert "-32601" in err.value.reason


# --------------------------------------------------------------------------- one pinned revision


def test_discover_reports_the_discover_result_as_sent(demo: DemoMcpServer, mcp: McpSdkTransport) -> None:
    # Given the demo server (it speaks 2026-07-28)
    # When the transport probes it at that revision
    probe = mcp.discover(demo.url, {}, revision=REVISION, timeout_s=T)
    # Then one server/discover went out under the revision, and its DiscoverResult came back as the server sent it
    [sent] = demo.exchanges
    assert (sent["method"], sent["protocolVersion"]) == ("server/discover", REVISION)
    assert probe.accepted and probe.result == sent["result"] and probe.supported == (REVISION,)
    assert probe.result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "openwop-demo-mcp"


def test_a_server_of_an_older_revision_refuses_the_probe_and_nothing_falls_back() -> None:
    # Given a server that speaks only 2025-11-25 (the SDK's server, told its revision)
    with DemoMcpServer(revisions=("2025-11-25",)) as old:
        # When the transport probes it at 2026-07-28
        probe = McpSdkTransport(EgressPolicy.from_entries(LOOPBACK)).discover(
            old.url, {}, revision=REVISION, timeout_s=T
        )
        # Then the server's -32022 refusal and the revisions it named come back; no initialize handshake followed
        assert not probe.accepted and probe.result is None
        assert probe.supported == ("2025-11-25",) and "-32022" in (probe.refusal or "")
        assert [x["method"] for x in old.exchanges] == ["server/discover"]


def test_a_discover_result_without_the_revision_is_not_accepted() -> None:
    # Given a server whose DiscoverResult names other revisions only
    with DemoMcpServer(discover_lists=("2025-11-25", "2027-01-01")) as other:
        probe = McpSdkTransport(EgressPolicy.from_entries(LOOPBACK)).discover(
            other.url, {}, revision=REVISION, timeout_s=T
        )
        # Then the answer is kept as sent, and the revision is not accepted
        assert probe.result is not None and probe.supported == ("2025-11-25", "2027-01-01")
        assert not probe.accepted


def test_an_unaccepted_probe_opens_no_exchange(demo: DemoMcpServer, mcp: McpSdkTransport) -> None:
    refused = McpDiscovery(REVISION, None, ("2025-11-25",), "-32022")
    with pytest.raises(ValueError):
        mcp.call_tool(demo.url, {}, "lookup_customer", {"id": "x"}, meta={}, discovered=refused, timeout_s=T)
    assert demo.hosts == []


def test_every_request_of_an_exchange_carries_the_pinned_revision(demo: DemoMcpServer, mcp: McpSdkTransport) -> None:
    # Given an accepted probe
    probe = mcp.discover(demo.url, {}, revision=REVISION, timeout_s=T)
    # When a tool is called under it
    mcp.call_tool(demo.url, {}, "lookup_customer", {"id": "v"}, meta={}, discovered=probe, timeout_s=T)
    # Then no request probed again or shook hands, and each named the revision in its header and its _meta
    assert [x["method"] for x in demo.exchanges] == ["server/discover", "tools/list", "tools/call"]
    assert {x["protocolVersion"] for x in demo.exchanges} == {REVISION}
    assert {x["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] for x in demo.exchanges} == {REVISION}


def test_call_tool_result_is_the_json_the_server_sent_meta_included() -> None:
    import mcp_types as types

    def tagged(args: dict[str, Any]) -> Any:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=str(args["nonce"]))],
            structured_content={"nonce": args["nonce"]},
            _meta={"dev.openwop.conformance/nonce": args["nonce"]},
        )

    tool = {"name": "structured_echo", "inputSchema": {"type": "object", "properties": {"nonce": {"type": "string"}}}}
    # Given a tool whose result carries _meta
    with DemoMcpServer(extra_tools=[(tool, tagged)]) as srv:
        mcp = McpSdkTransport(EgressPolicy.from_entries(LOOPBACK))
        probe = mcp.discover(srv.url, {}, revision=REVISION, timeout_s=T)
        # When it is called
        result = mcp.call_tool(srv.url, {}, "structured_echo", {"nonce": "n-1"}, meta={}, discovered=probe, timeout_s=T)
        # Then the result is exactly the JSON-RPC result the server sent (_meta, resultType and all)
        assert result == srv.exchanges[-1]["result"]
        assert result["_meta"]["dev.openwop.conformance/nonce"] == "n-1" and result["resultType"] == "complete"


def test_list_page_is_one_page_as_sent_and_forwards_the_cursor(demo: DemoMcpServer, mcp: McpSdkTransport) -> None:
    from shared.ports import McpOp

    def page(cursor: str | None) -> Any:
        return mcp.exchange(demo.url, {}, McpOp("tools/list", cursor=cursor), revision=REVISION, timeout_s=T).result

    # When the first page is asked for, then the page its cursor names
    first = page(None)
    second = page(first["nextCursor"])
    # Then each is one page, as sent, and the cursor reached the server
    pages = [x for x in demo.exchanges if x["method"] == "tools/list"]
    assert [first, second] == [x["result"] for x in pages]
    assert len(first["tools"]) == 2 and "nextCursor" not in second
    assert pages[1]["params"]["cursor"] == first["nextCursor"]


def test_read_resource_returns_the_result_as_sent(demo: DemoMcpServer, mcp: McpSdkTransport) -> None:
    from shared.ports import McpOp

    got = mcp.exchange(
        demo.url, {}, McpOp("resources/read", uri="demo://greeting"), revision=REVISION, timeout_s=T
    ).result
    assert got == demo.exchanges[-1]["result"]
    assert got["contents"][0]["text"] == "hello from the demo MCP server"


# --------------------------------------------------------------------------- failures without an answer


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_server_down_is_a_transport_error_quickly(mcp: McpSdkTransport) -> None:
    # Given a loopback port nothing listens on
    url = f"http://127.0.0.1:{_closed_port()}/mcp"
    # When the transport calls it
    started = time.monotonic()
    with pytest.raises(TransportError) as err:
        mcp.call_tool(url, {}, "lookup_customer", {"id": "x"}, meta={}, discovered=ACCEPTED, timeout_s=T)
    # Then it fails at once with a connection reason
    assert time.monotonic() - started < 2
    assert err.value.reason == "the connection to the MCP server failed"


def test_server_that_never_answers_times_out(mcp: McpSdkTransport) -> None:
    # Given a loopback socket that accepts connections (backlog) but never answers
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
        # When the transport calls it with a short timeout
        started = time.monotonic()
        with pytest.raises(TransportError) as err:
            mcp.list_tools(url, {}, discovered=ACCEPTED, timeout_s=0.5)
        # Then it gives up on time
        assert time.monotonic() - started < 3
        assert err.value.reason == "the MCP server did not answer in time"


def test_url_must_be_http(mcp: McpSdkTransport) -> None:
    with pytest.raises(TransportError):
        mcp.list_tools("file:///etc/passwd", {}, discovered=ACCEPTED, timeout_s=T)


# --------------------------------------------------------------------------- egress


def test_loopback_not_allowlisted_is_refused_with_no_hit(demo: DemoMcpServer) -> None:
    # Given a policy that does not allowlist loopback
    guarded = McpSdkTransport(EgressPolicy.from_entries([]))
    # When the loopback server is called and listed
    with pytest.raises(EgressRefusedError) as err:
        guarded.call_tool(
            demo.url, {}, "create_ticket", {"title": "t", "body": "b"}, meta={}, discovered=ACCEPTED, timeout_s=T
        )
    with pytest.raises(EgressRefusedError):
        guarded.discover(demo.url, {}, revision=REVISION, timeout_s=T)
    with pytest.raises(EgressRefusedError):
        guarded.list_tools(demo.url, {}, discovered=ACCEPTED, timeout_s=T)
    # Then both are refused and the server saw no HTTP request at all
    assert "loopback" in err.value.reason
    assert demo.hosts == [] and demo.calls == {} and demo.list_pages == 0


@pytest.mark.parametrize(
    "address, why", [("169.254.169.254", "metadata"), ("10.0.0.5", "private"), ("fd00::1", "private")]
)
def test_guarded_addresses_are_refused_before_any_connection(address: str, why: str) -> None:
    # Given a test name that resolves to a guarded address and a connect layer that fails if reached
    connects: list[tuple[str, int]] = []
    policy = EgressPolicy.from_entries(LOOPBACK, resolver=lambda host, port: [address])
    guarded = McpSdkTransport(policy, connect=refusing_connect(connects))
    # When the tool server under that name is called
    with pytest.raises(EgressRefusedError) as err:
        guarded.call_tool(
            "https://tools.test.invalid/mcp",
            {},
            "lookup_customer",
            {"id": "x"},
            meta={},
            discovered=ACCEPTED,
            timeout_s=T,
        )
    # Then the guard refused it and nothing tried to connect
    assert why in err.value.reason
    assert connects == []


def test_name_resolving_to_public_and_private_is_refused() -> None:
    connects: list[tuple[str, int]] = []
    policy = EgressPolicy.from_entries([], resolver=lambda host, port: ["93.184.215.14", "10.0.0.5"])
    with pytest.raises(EgressRefusedError):
        McpSdkTransport(policy, connect=refusing_connect(connects)).list_tools(
            "https://tools.test.invalid/mcp", {}, discovered=ACCEPTED, timeout_s=T
        )
    assert connects == []


def _recording(demo: DemoMcpServer) -> tuple[McpSdkTransport, list[str], list[tuple[str, int]]]:
    """A transport whose name lookups and connections are recorded (the name maps to the loopback server)."""
    from httpcore2._backends.anyio import AnyIOBackend

    resolved: list[str] = []
    connects: list[tuple[str, int]] = []

    def resolver(host: str, port: int) -> list[str]:
        resolved.append(host)
        return ["127.0.0.1"]

    async def connect(address: str, port: int, timeout: float | None) -> Any:
        connects.append((address, port))
        return await AnyIOBackend().connect_tcp(address, port, timeout=timeout)

    return McpSdkTransport(EgressPolicy.from_entries(LOOPBACK, resolver=resolver), connect=connect), resolved, connects


def test_connection_is_pinned_to_the_checked_address(demo: DemoMcpServer) -> None:
    # Given a name only our injected resolver knows, mapped to the loopback server, and a connect layer that
    # records where it connects before opening the real loopback connection
    pinned, resolved, connects = _recording(demo)
    url = f"http://mcp.test.invalid:{demo.port}/mcp"
    # When the tool is called by that name (which no DNS server would resolve)
    result = pinned.call_tool(url, {}, "lookup_customer", {"id": "p"}, meta={}, discovered=ACCEPTED, timeout_s=T)
    # Then the name was resolved once, by the guard; every connection went to the checked address; and the server
    # saw the original name in the Host header
    assert result["structuredContent"]["id"] == "p"
    assert resolved == ["mcp.test.invalid"]
    assert connects and set(connects) == {("127.0.0.1", demo.port)}
    assert demo.hosts and set(demo.hosts) == {f"mcp.test.invalid:{demo.port}"}
    assert demo.calls == {"lookup_customer": 1}


# --------------------------------------------------------------------------- one exchange: the probe and a request


def test_an_exchange_probes_and_calls_over_one_lookup_and_one_connection(demo: DemoMcpServer) -> None:
    from shared.ports import McpOp

    transport, resolved, connects = _recording(demo)
    url = f"http://mcp.test.invalid:{demo.port}/mcp"
    # When a tool is called in one exchange (the probe, the listing that finds the tool, the call)
    got = transport.exchange(
        url,
        {},
        McpOp("tools/call", name="lookup_customer", arguments={"id": "x"}, meta={}),
        revision=REVISION,
        timeout_s=T,
    )
    # Then the probe was accepted and the call answered, the name was looked up once and one connection carried
    # every request (a probe and a call each of their own would be two lookups and two connections)
    assert got.discovery.accepted and got.error is None
    assert got.result is not None and got.result["structuredContent"]["id"] == "x"
    assert [x["method"] for x in demo.exchanges] == ["server/discover", "tools/list", "tools/call"]
    assert resolved == ["mcp.test.invalid"]
    assert connects == [("127.0.0.1", demo.port)]


def test_a_request_that_fails_after_the_probe_keeps_the_probes_answer(
    demo: DemoMcpServer, mcp: McpSdkTransport
) -> None:
    from shared.ports import McpOp

    # When the exchange names a tool the server does not list
    got = mcp.exchange(
        demo.url, {}, McpOp("tools/call", name="no_such_tool", arguments={}, meta={}), revision=REVISION, timeout_s=T
    )
    # Then the probe's answer is kept beside the failure, and nothing was called
    assert got.discovery.accepted and got.result is None
    assert isinstance(got.error, TransportError) and "no_such_tool" in got.error.reason
    assert demo.calls == {} and "tools/call" not in [x["method"] for x in demo.exchanges]


def test_an_exchange_sends_no_request_to_a_server_that_refuses_the_revision() -> None:
    from shared.ports import McpOp

    # Given a server that speaks only another revision
    old = DemoMcpServer(revisions=("2025-11-25",))
    old.start()
    try:
        got = McpSdkTransport(EgressPolicy.from_entries(LOOPBACK)).exchange(
            old.url,
            {},
            McpOp("tools/call", name="lookup_customer", arguments={"id": "x"}, meta={}),
            revision=REVISION,
            timeout_s=T,
        )
        # Then the probe was refused, nothing else went out, and there is no result and no error
        assert not got.discovery.accepted and got.discovery.supported == ("2025-11-25",)
        assert got.result is None and got.error is None
        assert [x["method"] for x in old.exchanges] == ["server/discover"] and old.calls == {}
    finally:
        old.stop()


def test_the_exchanges_one_deadline_ends_a_request_that_outlasts_it_and_keeps_the_probe() -> None:
    from shared.ports import McpOp

    release = threading.Event()

    def stalls(args: dict[str, Any]) -> dict[str, Any]:
        release.wait(20)  # bounded: the test releases it as soon as the client gave up
        return {"late": True}

    tool = {"name": "stalls", "inputSchema": {"type": "object"}}
    # Given a tool that answers only after the exchange's deadline
    with DemoMcpServer(extra_tools=[(tool, stalls)]) as srv:
        try:
            got = McpSdkTransport(EgressPolicy.from_entries(LOOPBACK)).exchange(
                srv.url, {}, McpOp("tools/call", name="stalls", arguments={}, meta={}), revision=REVISION, timeout_s=5.0
            )  # (the probe, first in the same deadline, must finish inside it on a loaded machine)
        finally:
            release.set()
        # Then the exchange ends with the request's timeout as its error, beside the probe's accepted answer
        assert got.discovery.accepted and got.result is None
        assert isinstance(got.error, TransportError) and got.error.reason == "the MCP server did not answer in time"


# --------------------------------------------------------------------------- threads and import cost


def test_calls_from_worker_threads_leave_no_threads_behind(demo: DemoMcpServer, mcp: McpSdkTransport) -> None:
    # Given a pool of worker threads (as local Lambda tasks run)
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        baseline = threading.active_count()
        # When each calls the server concurrently
        futures = [
            pool.submit(
                mcp.call_tool,
                demo.url,
                {},
                "lookup_customer",
                {"id": str(i)},
                meta={},
                discovered=ACCEPTED,
                timeout_s=T,
            )
            for i in range(8)
        ]
        results = [f.result(timeout=30) for f in futures]
        # Then each got its own answer and no thread outlived its call (the pool's own workers aside)
        assert sorted(r["structuredContent"]["id"] for r in results) == [str(i) for i in range(8)]
        # (a call's helper threads end just after it returns: a bound of 30 s for a loaded machine, not a target)
        deadline = time.monotonic() + 30
        while threading.active_count() > baseline + 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threading.active_count() <= baseline + 4
    assert demo.calls == {"lookup_customer": 8}
    deadline = time.monotonic() + 30
    while threading.active_count() > baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= baseline


def test_importing_the_transport_does_not_import_the_sdk() -> None:
    code = (
        "import sys, shared.transports.mcp, shared.wiring; "
        "print(sorted(m for m in ('mcp', 'httpx2', 'httpcore2', 'anyio') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
