"""The local demo: real tool servers on loopback, registered for every dev tenant, and a workflow that uses them.

``make serve`` starts a small HTTP tool server (``demo_tools``) and an MCP server (``demo_mcp``, built with the
``mcp`` SDK) next to the host and registers, for each tenant:
- HTTP tools ``demo.crm:lookup`` (POST), ``demo.desk:ticket`` (POST, idempotent) and ``demo.meteo:weather`` (GET);
- the MCP server ``demo``, so its tools are ``mcp:demo.lookup_customer``, ``mcp:demo.create_ticket`` and
  ``mcp:demo.fail_always``;
- the scripted agent ``demo-support-agent`` (looks the customer up over MCP, checks the weather over HTTP, opens a
  ticket over HTTP) and the workflow ``demo-support`` that runs it.

The agent, workflow and registrations are ``shared.services.demo``'s (the same ones a deployed stack is seeded
with). A run of ``demo-support`` calls both servers for real; a replay fork of it serves every answer from the recording
and the servers see no request (``GET <demo tools>/hits`` shows the count).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.local.demo_tools import DemoToolServer
from shared.ports import Ports
from shared.services.demo import AGENT, DEMO_AGENT, DEMO_SERVER_ID, DEMO_WORKFLOW, WORKFLOW, seed_demo

__all__ = ["AGENT", "DEMO_AGENT", "DEMO_SERVER_ID", "DEMO_WORKFLOW", "WORKFLOW", "Demo", "start_demo"]


@dataclass
class Demo:
    tools: DemoToolServer
    tools_url: str
    mcp: Any
    mcp_url: str
    notes: list[str] = field(default_factory=list)
    """One line per server that is not on the port it would have had (that port was taken)."""

    def stop(self) -> None:
        self.tools.stop()
        self.mcp.stop()


def start_demo(ports: Ports, tenants: list[str], base_port: int = 0) -> Demo:
    """Start both demo servers on loopback and register them for each tenant.

    With the host on ``base_port`` (not 0), the HTTP tool server listens on ``base_port + 1`` and the MCP server on
    ``base_port + 2`` (8788 and 8789 for the default 8787), or on a free port when that one is taken (``notes``
    says so); with 0, on free ports. On kept state, demo tools registered at another URL by an earlier start are
    registered again at this one.
    """
    from shared.local.demo_mcp import DemoMcpServer

    notes: list[str] = []
    http = DemoToolServer()
    wanted = base_port + 1 if base_port else 0
    try:
        http_url = http.start(port=wanted)
    except OSError as exc:
        http_url = http.start(port=0)
        notes.append(f"port {wanted} is taken ({exc.strerror or exc}): the demo tool server is on {http_url}")
    wanted = base_port + 2 if base_port else 0
    mcp = DemoMcpServer(port=wanted)
    try:
        mcp_url = mcp.start()
    except OSError as exc:
        mcp = DemoMcpServer(port=0)
        mcp_url = mcp.start()
        notes.append(f"port {wanted} is taken ({exc.strerror or exc}): the demo MCP server is on {mcp_url}")
    for tenant in tenants:
        _forget_moved_tools(ports, tenant, http_url)
        seed_demo(ports, tenant, http_url, mcp_url)
    return Demo(http, http_url, mcp, mcp_url, notes)


def _forget_moved_tools(ports: Ports, tenant: str, tools_url: str) -> None:
    """The demo's HTTP tools registered by an earlier start at another URL (kept state, the server on another
    port): deleted, so seeding registers them at this URL (one version, one URL: a changed URL is a conflict)."""
    from shared.services.demo import http_tools

    for doc in http_tools(tools_url):
        current = ports.tools.get_tool(tenant, doc["toolId"])
        if current is not None and (current.get("source") or {}).get("url") != doc["source"]["url"]:
            ports.tools.delete_tool(tenant, doc["toolId"])
