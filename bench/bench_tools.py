"""Real tools: AWS requests per HTTP-tool call, and the host's local overhead per call versus calling the tool
server directly. The tool server is the loopback demo server (``shared.local.demo_tools``). Then MCP: what
registering an MCP server costs with its negotiation's audit run, and per MCP tool call (each negotiated at the
pinned revision, its ``negotiation.decided`` before the call's events) the AWS requests, the bytes, the requests
the MCP server receives and the host's time (the loopback ``shared.local.demo_mcp`` server).

Run: ``make bench`` (or ``.venv/bin/python -m bench.bench_tools``). Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

from bench.common import TENANT, Usage, api_event, call, line, start_stack, wait_status

CALLS = 100
MCP_CALLS = 30


def _create(workflow_id: str, inputs: dict) -> str:
    out = call("create_run", api_event("POST", "/runs", "/runs", {"workflowId": workflow_id, "inputs": inputs}))
    return str(json.loads(out["body"])["runId"])


def _timed(
    meter: Any, ports: Any, workflow_id: str, tool: str, args: dict[str, Any], calls: int
) -> tuple[Usage, float, str]:
    """A scripted agent's run making ``calls`` calls of ``tool``: its usage, its wall time, its id."""
    script = {"calls": [{"tool": tool, "args": args}] * calls, "answer": "ok"}
    meter.reset()
    started = time.perf_counter()
    with meter.origin("create"):
        run_id = _create(workflow_id, {"script": script})
    wait_status(ports, run_id, meter)
    return meter.usage("create", run_id), time.perf_counter() - started, run_id


def main() -> None:
    from shared.local.demo_tools import DemoToolServer
    from shared.services.workflows import register_workflow
    from shared.wiring import get_ports
    from tests.workflows import definition, node, variable

    aws, meter = start_stack()
    tools = DemoToolServer()
    url = tools.start()
    ports = get_ports()
    try:
        out = call(
            "manage_tools",
            api_event(
                "POST",
                "/host/openwop-serverless/tools",
                "/host/openwop-serverless/tools",
                {
                    "toolId": "bench.crm:lookup",
                    "description": "lookup",
                    "source": {"kind": "http", "url": url + "/crm/lookup"},
                    "inputSchema": {"type": "object", "required": ["customerId"]},
                },
            ),
        )
        assert out["statusCode"] in (200, 201), out
        register_workflow(
            ports,
            TENANT,
            definition(
                "bench-http-agent",
                [
                    node(
                        "agent",
                        "core.agent",
                        config={"agentId": "conformance-eval-agent"},
                        inputs={"input": variable("script")},
                    )
                ],
            ),
        )

        def run(calls: int) -> tuple[Usage, float]:
            used, wall, _ = _timed(meter, ports, "bench-http-agent", "bench.crm:lookup", {"customerId": "c-1"}, calls)
            return used, wall

        run(1)  # warm the catalog and credential caches of this process
        base, base_wall = run(0)
        used, wall = run(CALLS)
        requests, base_requests, by_op = used.total(), base.total(), used.top()
        hits_before = tools.count()
        direct = time.perf_counter()
        for _ in range(CALLS):
            req = urllib.request.Request(
                url + "/crm/lookup",
                data=b'{"customerId":"c-1"}',
                method="POST",
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=5) as resp:  # noqa: S310 - loopback demo server
                resp.read()
        direct_ms = (time.perf_counter() - direct) * 1000 / CALLS
        print(f"HTTP tools ({CALLS} calls of a registered tool on a loopback server, local moto)")
        line(
            "AWS requests per HTTP-tool call",
            f"{(requests - base_requests) / CALLS:.2f}",
            f"({requests} for the run, {base_requests} for the same run without calls; {by_op})",
        )
        per_call = used.minus(base)
        line(
            "bytes sent / received per HTTP-tool call",
            f"{per_call.bytes_sent() // CALLS} / {per_call.bytes_received() // CALLS}",
            "B",
        )
        line("host time per call (engine + moto + the call)", f"{(wall - base_wall) * 1000 / CALLS:.1f}", "ms")
        line("calling the tool server directly", f"{direct_ms:.2f}", "ms per call")
        line("tool server hits by the direct loop", tools.count() - hits_before)
        _mcp(meter, ports)
    finally:
        meter.close()
        tools.stop()
        aws.stop()


def _mcp(meter: Any, ports: Any) -> None:
    from shared.local.demo_mcp import DemoMcpServer
    from shared.services.workflows import register_workflow
    from tests.workflows import definition, node, variable

    server = DemoMcpServer()
    url = server.start()
    try:
        path = "/host/openwop-serverless/mcp-servers"
        meter.reset()
        started = time.perf_counter()
        with meter.origin("register"):
            out = call("manage_tools", api_event("POST", path, path, {"serverId": "bench", "url": url}))
        register_ms = (time.perf_counter() - started) * 1000
        assert out["statusCode"] in (200, 201), out
        audit = str(json.loads(out["body"])["negotiation"]["runId"])
        wait_status(ports, audit, meter)
        registered = meter.usage("register", audit)
        register_exchanges = [x["method"] for x in server.exchanges]
        register_workflow(
            ports,
            TENANT,
            definition(
                "bench-mcp-agent",
                [
                    node(
                        "agent",
                        "core.agent",
                        config={"agentId": "conformance-eval-agent"},
                        inputs={"input": variable("script")},
                    )
                ],
            ),
        )

        def run(calls: int) -> tuple[Usage, float, str]:
            return _timed(meter, ports, "bench-mcp-agent", "mcp:bench.lookup_customer", {"id": "c-1"}, calls)

        run(1)  # warm the catalog, the credential cache and the SDK's imports of this process
        base, base_wall, _ = run(0)
        server.reset()
        used, wall, run_id = run(MCP_CALLS)
        per_call = used.minus(base)
        methods = [x["method"] for x in server.exchanges]
        decided = [e for e in ports.events.read_events(run_id) if e["type"] == "negotiation.decided"]
        print(f"MCP tools ({MCP_CALLS} calls of a registered MCP tool on a loopback server, local moto)")
        line("registration: AWS requests, its audit run included", registered.total(), f"({registered.top()})")
        line(
            "registration: requests the MCP server received",
            len(register_exchanges),
            f"({', '.join(register_exchanges)})",
        )
        line("registration: host time", f"{register_ms:.0f}", "ms")
        line(
            "AWS requests per MCP-tool call",
            f"{(used.total() - base.total()) / MCP_CALLS:.2f}",
            f"({used.total()} for the run, {base.total()} without calls; {used.top()})",
        )
        line(
            "bytes sent / received per MCP-tool call",
            f"{per_call.bytes_sent() // MCP_CALLS} / {per_call.bytes_received() // MCP_CALLS}",
            "B",
        )
        line(
            "MCP server requests per call",
            f"{len(methods) / MCP_CALLS:.2f}",
            f"(server/discover {methods.count('server/discover')}, tools/list {methods.count('tools/list')}, "
            f"tools/call {methods.count('tools/call')})",
        )
        line(
            "negotiation.decided events in the run",
            len(decided),
            f"({len(json.dumps(decided[0]['payload'], separators=(',', ':')))} B payload each)",
        )
        line(
            "host time per MCP call (engine + moto + probe + call)",
            f"{(wall - base_wall) * 1000 / MCP_CALLS:.1f}",
            "ms",
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
