"""The McpTransport port over the official MCP Python SDK (``mcp`` 2.x, streamable HTTP), through the egress guard.

One revision, no downgrade. Every exchange speaks exactly the revision its caller names (the host pins one,
``shared.engine.negotiation``): ``discover`` sends one ``server/discover`` at that revision and reports what the
server answered (its ``DiscoverResult`` as sent, or its refusal: ``-32022`` with the revisions it speaks, or the
error a server of an older revision gives a request it does not understand); it never falls back to the
``initialize`` handshake. Every other method takes an accepted probe and opens the SDK's ``Client`` pinned to its
revision (``mode=<revision>``, ``prior_discover=`` the probe's result): no second probe, no handshake, the
revision in the ``MCP-Protocol-Version`` header and in each request's ``_meta``. Each call is one short-lived
client; the client-side response cache is off, so every request reaches the server. ``exchange`` is the probe and
one request in one call: one name lookup, one HTTP client (so one connection when the server keeps it alive) shared
by the probe's SDK client and the request's, and one deadline, ``timeout_s``, for the whole (a tool call is the
engine's one exchange per call; decision 0139).

``call_tool`` lists the server's tools (page by page, until one names the tool) before calling it: a name the
server does not list is a ``TransportError`` without a call, the SDK then knows the tool's ``x-mcp-header``
parameters (mirrored into ``Mcp-Param-*`` headers) and its output schema, so it does not list again after the
call (a failure after the tool ran would lose a result the server already produced).

Pinning. Before anything is built, the URL's host is resolved once through ``EgressPolicy.resolve`` (refused
destinations raise ``EgressRefusedError`` with no connection attempted). The SDK is then given an ``httpx2``
client (the SDK's HTTP library) whose connection pool uses our own httpcore network backend: its
``connect_tcp`` ignores name resolution entirely and opens the TCP connection to the addresses the guard
returned, in order (the next one only if a connection is refused). The URL keeps the host name, so the
``Host`` header, TLS SNI and certificate checks stay on the name, and the name is never resolved again (a DNS
answer that changes after the check cannot reach a refused address). The backend refuses any other
host or port (the SDK follows only same-origin redirects, so this never fires for a sane server).
The client does not read proxy settings from the environment (a proxy would be a connection we did not check).

Sync over async: each method runs its coroutine with ``anyio.run`` in the calling thread (a worker thread
is fine; a thread that is already running an event loop is not), so every task the SDK starts ends with the
call. ``timeout_s`` bounds the whole call after the guard's name lookup (connect, every request).

Results are the JSON-RPC results the server sent (``CallToolResult``, a ``ListToolsResult`` page,
``ReadResourceResult``, ``DiscoverResult``), unaltered: ``_meta`` and members the SDK's models do not know
included. The SDK still checks them: a result must be valid for the revision, and a successful result's
``structuredContent`` must match the tool's ``outputSchema`` (a mismatch is a ``TransportError``).
``isError: true`` results are results, not errors; a result asking for input (``input_required``) is a
``TransportError`` (this host answers no elicitation). ``list_tools`` (registration) keeps the SDK's parsed tools
dumped back to JSON (``by_alias``, ``exclude_unset``): on this revision the SDK drops listed tools whose
``x-mcp-header`` annotations are invalid.

Errors carry a safe ``reason``: never a header, credential or address. Nothing here logs headers.
The SDK's modules are imported inside the methods: importing this module costs nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import Any

from shared.ports import EgressRefusedError, McpDiscovery, McpExchange, McpOp, TransportError
from shared.transports.egress import EgressPolicy, Target, check_url

MAX_PAGES = 50
MAX_TOOLS = 1000
MAX_REASON = 200
MAX_SUPPORTED = 32  # revisions kept of a server's list (a server naming more is still judged by these)
# The JSON-RPC errors with which a server refuses the revision a request names: -32022 (UnsupportedProtocolVersion,
# 2026-07-28, with the revisions it speaks); from a server of an older revision, the Bad Request its transport answers
# an unknown MCP-Protocol-Version with (-32600), or a method or parameters it does not know (-32601, -32602).
REVISION_REFUSALS = (-32022, -32600, -32601, -32602)

Connect = Callable[[str, int, float | None], Awaitable[Any]]
"""(checked address, port, timeout) -> an httpcore ``AsyncNetworkStream``; tests inject one to watch connections."""


class McpSdkTransport:
    def __init__(self, policy: EgressPolicy, *, connect: Connect | None = None) -> None:
        self._policy = policy
        self._connect = connect

    def discover(self, url: str, headers: dict[str, str], *, revision: str, timeout_s: float) -> McpDiscovery:
        """One ``server/discover`` at ``revision``: the server's answer, or its refusal of the revision."""
        return _run(self._discover, self._target(url), headers, timeout_s, revision)

    def list_tools(
        self, url: str, headers: dict[str, str], *, discovered: McpDiscovery, timeout_s: float
    ) -> list[dict[str, Any]]:
        """Every tool the server lists (all pages, server order), each as the JSON object the server sent."""
        return _run(self._list_tools, self._target(url), headers, timeout_s, _accepted(discovered))

    def call_tool(
        self,
        url: str,
        headers: dict[str, str],
        name: str,
        arguments: dict[str, Any],
        *,
        meta: dict[str, Any],
        discovered: McpDiscovery,
        timeout_s: float,
    ) -> dict[str, Any]:
        """The server's ``CallToolResult`` as JSON (``isError: true`` included); ``meta`` goes out as ``_meta``."""
        return _run(
            self._request,
            self._target(url),
            headers,
            timeout_s,
            _accepted(discovered),
            McpOp("tools/call", name=name, arguments=arguments, meta=meta),
        )

    def exchange(self, url: str, headers: dict[str, str], op: McpOp, *, revision: str, timeout_s: float) -> McpExchange:
        """The probe at ``revision`` and, when the server accepts it, ``op`` over the same connections: one name
        lookup, one ``timeout_s`` for the whole. A failure before the server's answer to the probe raises as
        ``discover``'s would; one after it is the exchange's ``error``, beside the probe's answer."""
        return _run(self._exchange, self._target(url), headers, timeout_s, revision, op, bounded=False)

    def _target(self, url: str) -> Target:
        """The URL's destination, checked by the egress guard (``EgressRefusedError`` before any connection)."""
        return check_url(self._policy, url, "MCP server")

    async def _discover(self, target: Target, headers: dict[str, str], timeout_s: float, revision: str) -> McpDiscovery:
        async with self._http(target, headers, timeout_s) as http:
            return await self._probe(self._sdk(target, http, timeout_s, revision, None), revision)

    @staticmethod
    async def _probe(sdk: Any, revision: str) -> McpDiscovery:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        async with sdk as client:
            try:
                raw = await client.session.send_discover(revision)
            except MCPError as exc:
                if exc.code not in REVISION_REFUSALS:
                    raise
                supported = _supported(getattr(exc.error, "data", None)) if exc.code == -32022 else ()
                return McpDiscovery(
                    revision, None, supported, _clip(f"the MCP server answered with error {exc.code}: {exc.message}")
                )
        types.DiscoverResult.model_validate(raw)  # not a DiscoverResult: not MCP (a ValidationError, translated)
        return McpDiscovery(revision, copy.deepcopy(raw), _supported(raw, key="supportedVersions"))

    async def _exchange(
        self, target: Target, headers: dict[str, str], timeout_s: float, revision: str, op: McpOp
    ) -> McpExchange:
        import anyio

        deadline = anyio.current_time() + timeout_s
        async with self._http(target, headers, timeout_s) as http:
            with anyio.fail_at(deadline):
                discovery = await self._probe(self._sdk(target, http, timeout_s, revision, None), revision)
            if not discovery.accepted:
                return McpExchange(discovery)
            try:
                with anyio.fail_at(deadline):
                    async with self._sdk(target, http, timeout_s, revision, discovery.result) as client:
                        result = await _perform(client, op, timeout_s)
            except Exception as exc:  # noqa: BLE001 - judged by _translate; what it does not know is raised
                failure = _translate(exc)
                if not isinstance(failure, TransportError | EgressRefusedError):
                    raise
                return McpExchange(discovery, None, failure)
        return McpExchange(discovery, result)

    async def _list_tools(
        self, target: Target, headers: dict[str, str], timeout_s: float, discovered: McpDiscovery
    ) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        async with (
            self._http(target, headers, timeout_s) as http,
            self._sdk(target, http, timeout_s, discovered.revision, discovered.result) as client,
        ):
            cursor: str | None = None
            for _ in range(MAX_PAGES):
                page = await client.list_tools(cursor=cursor)
                tools.extend(_dump(tool) for tool in page.tools)
                if len(tools) > MAX_TOOLS:
                    raise TransportError(f"the MCP server lists more than {MAX_TOOLS} tools")
                cursor = page.next_cursor
                if not cursor:
                    return tools
        raise TransportError(f"the MCP server's tool list runs past {MAX_PAGES} pages")

    async def _request(
        self, target: Target, headers: dict[str, str], timeout_s: float, discovered: McpDiscovery, op: McpOp
    ) -> dict[str, Any]:
        async with (
            self._http(target, headers, timeout_s) as http,
            self._sdk(target, http, timeout_s, discovered.revision, discovered.result) as client,
        ):
            return await _perform(client, op, timeout_s)

    def _http(self, target: Target, headers: dict[str, str], timeout_s: float) -> Any:
        """The HTTP client whose connections go only to the target's checked addresses (it may serve several SDK
        clients: they never close it)."""
        import httpx2

        return httpx2.AsyncClient(
            headers=headers,
            timeout=httpx2.Timeout(timeout_s),
            transport=_pinned_transport_class()(target.host, target.port, target.addresses, self._connect),
            trust_env=False,
            follow_redirects=False,
        )

    @staticmethod
    def _sdk(target: Target, http: Any, timeout_s: float, revision: str, discover: dict[str, Any] | None) -> Any:
        """An SDK client pinned to ``revision`` over ``http``: it adopts ``discover`` (a probe's result; None: the
        SDK's minimal one, the probe itself) and never negotiates further."""
        import mcp_types as types
        from mcp.client import Client
        from mcp.client.streamable_http import streamable_http_client

        transport = streamable_http_client(target.url, http_client=http)
        prior = types.DiscoverResult.model_validate(discover) if discover is not None else None
        return Client(transport, mode=revision, prior_discover=prior, cache=None, read_timeout_seconds=timeout_s)


async def _perform(client: Any, op: McpOp, timeout_s: float) -> dict[str, Any]:
    """``op`` through an open client: the server's result JSON, checked against the revision (and a tool's result
    against its output schema)."""
    import mcp_types as types

    if op.method == "tools/list":
        raw = await _raw(
            client, types.ListToolsRequest(params=types.PaginatedRequestParams(cursor=op.cursor)), timeout_s
        )
        types.ListToolsResult.model_validate(raw)
        return raw
    if op.method == "resources/read":
        raw = await _raw(
            client, types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=op.uri)), timeout_s
        )
        _complete(raw)
        types.ReadResourceResult.model_validate(raw)
        return raw
    if op.method != "tools/call":
        raise ValueError(f"not an MCP request this host sends: {op.method}")
    await _find_tool(client, op.name)
    request = types.CallToolRequest(
        params=types.CallToolRequestParams(name=op.name, arguments=op.arguments or {}, _meta=op.meta or None)
    )
    raw = await _raw(client, request, timeout_s)
    _complete(raw)
    result = types.CallToolResult.model_validate(raw)
    if not result.is_error:
        await client.session.validate_tool_result(op.name, result)
    return raw


def _complete(raw: dict[str, Any]) -> None:
    if raw.get("resultType", "complete") != "complete":
        raise TransportError("the MCP server asked for input (input_required), which this host does not answer")


def _accepted(discovered: McpDiscovery) -> McpDiscovery:
    """Only an accepted probe opens an exchange: a refused revision is never spoken (no downgrade exists)."""
    if not discovered.accepted:
        raise ValueError("the MCP server does not speak the probed revision")
    return discovered


def _supported(data: Any, key: str = "supported") -> tuple[str, ...]:
    """The revision strings a server named (its ``-32022`` data, or its ``DiscoverResult``), at most a few dozen."""
    named = data.get(key) if isinstance(data, dict) else None
    if not isinstance(named, list):
        return ()
    return tuple(v for v in named if isinstance(v, str) and len(v) <= 32)[:MAX_SUPPORTED]


async def _raw(client: Any, request: Any, timeout_s: float) -> dict[str, Any]:
    """One request through the SDK's session (stamped with the revision, checked against it): its result JSON."""
    from pydantic import TypeAdapter

    raw: dict[str, Any] = await client.session.send_request(
        request, TypeAdapter(dict[str, Any]), request_read_timeout_seconds=timeout_s
    )
    return copy.deepcopy(raw)


async def _find_tool(client: Any, name: str) -> None:
    """List pages until one names the tool (before the call, so nothing after it can lose its result)."""
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        if any(tool.name == name for tool in page.tools):
            return
        cursor = page.next_cursor
        if not cursor:
            break
    raise TransportError(_clip(f"the MCP server does not list a tool named {name!r}"))


def _run(
    fn: Callable[..., Awaitable[Any]],
    target: Target,
    headers: dict[str, str],
    timeout_s: float,
    *args: Any,
    bounded: bool = True,
) -> Any:
    """``fn`` in an event loop of its own, within ``timeout_s`` (unless ``fn`` keeps its own deadline: ``bounded``
    False), what the SDK raised translated to the port's errors."""
    import anyio

    async def run() -> Any:
        if not bounded:
            return await fn(target, headers, timeout_s, *args)
        with anyio.fail_after(timeout_s):
            return await fn(target, headers, timeout_s, *args)

    try:
        return anyio.run(run)
    except BaseException as exc:  # noqa: B036 - exception groups from the SDK's task groups are unwrapped here
        translated = _translate(exc)
        if translated is exc:
            raise
        raise translated from exc


def _dump(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return out


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def _translate(exc: BaseException) -> BaseException:
    """The port's error for what the SDK raised (an exception group is judged by its most telling leaf)."""
    import httpcore2
    import httpx2
    from mcp.shared.exceptions import MCPError
    from pydantic import ValidationError

    leaves = _leaves(exc)
    for kind in (
        EgressRefusedError,
        TransportError,
        MCPError,
        TimeoutError,
        httpx2.TimeoutException,
        httpcore2.TimeoutException,
        httpx2.TransportError,
        httpcore2.NetworkError,
        ValidationError,
    ):
        for leaf in leaves:
            if isinstance(leaf, kind):
                return _port_error(leaf)
    for leaf in leaves:
        if isinstance(leaf, RuntimeError) and "structured content" in str(leaf):
            return TransportError("the MCP server's result does not match the tool's output schema")
    if not isinstance(exc, Exception) and not isinstance(exc, BaseExceptionGroup):
        return exc  # KeyboardInterrupt, SystemExit: not ours to rename
    return TransportError(f"the MCP call failed ({type(leaves[0]).__name__})")


def _port_error(leaf: BaseException) -> BaseException:
    """The port's error for the most telling leaf ``_translate`` found: the port's own as it is, an MCP error with its
    code and message, a timeout, an answer that is not MCP, else a failed connection."""
    import httpcore2
    import httpx2
    from mcp.shared.exceptions import MCPError
    from pydantic import ValidationError

    if isinstance(leaf, EgressRefusedError | TransportError):
        return leaf
    if isinstance(leaf, MCPError):
        return TransportError(_clip(f"the MCP server answered with error {leaf.code}: {leaf.message}"))
    if isinstance(leaf, TimeoutError | httpx2.TimeoutException | httpcore2.TimeoutException):
        return TransportError("the MCP server did not answer in time")
    if isinstance(leaf, ValidationError):
        return TransportError("the MCP server's answer is not valid MCP")
    return TransportError("the connection to the MCP server failed")


def _clip(reason: str) -> str:
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 3] + "..."


@lru_cache(maxsize=1)
def _pinned_transport_class() -> Any:
    """The httpx2 transport whose connections go only to the checked addresses (built on first use)."""
    import httpcore2
    import httpx2
    from httpcore2._backends.anyio import AnyIOBackend

    class PinnedBackend(httpcore2.AsyncNetworkBackend):
        def __init__(self, host: str, port: int, addresses: list[str], connect: Connect | None) -> None:
            self._host = host
            self._port = port
            self._addresses = addresses
            self._connect = connect
            self._anyio = AnyIOBackend()

        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> Any:
            if host.lower().rstrip(".") != self._host or port != self._port:
                raise httpcore2.ConnectError("not the destination the egress guard checked")
            last: Exception | None = None
            for address in self._addresses:
                try:
                    if self._connect is not None:
                        return await self._connect(address, port, timeout)
                    return await self._anyio.connect_tcp(address, port, timeout=timeout, socket_options=socket_options)
                except httpcore2.ConnectError as exc:
                    last = exc  # this address does not accept: try the next one the guard passed
            raise last or httpcore2.ConnectError("no address to connect to")

        async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
            raise httpcore2.ConnectError("unix sockets are not an MCP destination")

        async def sleep(self, seconds: float) -> None:
            await self._anyio.sleep(seconds)

    class PinnedTransport(httpx2.AsyncHTTPTransport):
        def __init__(self, host: str, port: int, addresses: list[str], connect: Connect | None) -> None:
            super().__init__(trust_env=False)
            # The same pool httpx2 builds, with the backend that connects only to the checked addresses.
            self._pool = httpcore2.AsyncConnectionPool(
                ssl_context=self._pool._ssl_context,
                network_backend=PinnedBackend(host, port, addresses, connect),
            )

    return PinnedTransport
