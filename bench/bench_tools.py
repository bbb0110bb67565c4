"""Real tools: AWS requests per HTTP-tool call, and the host's local overhead per call versus calling the tool
server directly. The tool server is the loopback demo server (``shared.local.demo_tools``).

Run: ``make bench`` (or ``.venv/bin/python -m bench.bench_tools``). Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import time
import urllib.request

from bench.common import TENANT, Usage, api_event, call, line, start_stack, wait_status

CALLS = 100


def _create(workflow_id: str, inputs: dict) -> str:
    out = call("create_run", api_event("POST", "/runs", "/runs", {"workflowId": workflow_id, "inputs": inputs}))
    return str(json.loads(out["body"])["runId"])


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
        out = call("manage_tools", api_event("POST", "/host/openwop-serverless/tools", "/host/openwop-serverless/tools", {
            "toolId": "bench.crm:lookup", "description": "lookup", "source": {"kind": "http", "url": url + "/crm/lookup"},
            "inputSchema": {"type": "object", "required": ["customerId"]}}))
        assert out["statusCode"] in (200, 201), out
        register_workflow(ports, TENANT, definition(
            "bench-http-agent", [node("agent", "core.agent", config={"agentId": "conformance-eval-agent"},
                                      inputs={"input": variable("script")})]))

        def run(calls: int) -> tuple[Usage, float]:
            script = {"calls": [{"tool": "bench.crm:lookup", "args": {"customerId": "c-1"}}] * calls, "answer": "ok"}
            meter.reset()
            started = time.perf_counter()
            with meter.origin("create"):
                run_id = _create("bench-http-agent", {"script": script})
            wait_status(ports, run_id, meter)
            return meter.usage("create", run_id), time.perf_counter() - started

        run(1)  # warm the catalog and credential caches of this process
        base, base_wall = run(0)
        used, wall = run(CALLS)
        requests, base_requests, by_op = used.total(), base.total(), used.top()
        hits_before = tools.count()
        direct = time.perf_counter()
        for _ in range(CALLS):
            req = urllib.request.Request(url + "/crm/lookup", data=b'{"customerId":"c-1"}', method="POST",
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=5) as resp:  # noqa: S310 - loopback demo server
                resp.read()
        direct_ms = (time.perf_counter() - direct) * 1000 / CALLS
        print(f"HTTP tools ({CALLS} calls of a registered tool on a loopback server, local moto)")
        line("AWS requests per HTTP-tool call", f"{(requests - base_requests) / CALLS:.2f}",
             f"({requests} for the run, {base_requests} for the same run without calls; {by_op})")
        per_call = used.minus(base)
        line("bytes sent / received per HTTP-tool call", f"{per_call.bytes_sent() // CALLS} / "
             f"{per_call.bytes_received() // CALLS}", "B")
        line("host time per call (engine + moto + the call)", f"{(wall - base_wall) * 1000 / CALLS:.1f}", "ms")
        line("calling the tool server directly", f"{direct_ms:.2f}", "ms per call")
        line("tool server hits by the direct loop", tools.count() - hits_before)
    finally:
        meter.close()
        tools.stop()
        aws.stop()


if __name__ == "__main__":
    main()
