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

from dataclasses import dataclass
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

    def stop(self) -> None:
        self.tools.stop()
        self.mcp.stop()


def start_demo(ports: Ports, tenants: list[str], base_port: int = 0) -> Demo:
    """Start both demo servers on loopback and register them for each tenant.

    With the host on ``base_port`` (not 0), the HTTP tool server listens on ``base_port + 1`` and the MCP server on
    ``base_port + 2`` (8788 and 8789 for the default 8787); with 0, on ephemeral ports.
    """
    from shared.local.demo_mcp import DemoMcpServer

    http = DemoToolServer()
    http_url = http.start(port=base_port + 1 if base_port else 0)
    mcp = DemoMcpServer(port=base_port + 2 if base_port else 0)
    mcp_url = mcp.start()
    for tenant in tenants:
        seed_demo(ports, tenant, http_url, mcp_url)
    return Demo(http, http_url, mcp, mcp_url)
