"""The local demo: real tool servers on loopback, registered for every dev tenant, and a workflow that uses them.

``make serve`` starts a small HTTP tool server (``demo_tools``) and an MCP server (``demo_mcp``, built with the
``mcp`` SDK) next to the host and registers, for each tenant:
- HTTP tools ``demo.crm:lookup`` (POST), ``demo.desk:ticket`` (POST, idempotent) and ``demo.meteo:weather`` (GET);
- the MCP server ``demo``, so its tools are ``mcp:demo.lookup_customer``, ``mcp:demo.create_ticket`` and
  ``mcp:demo.fail_always``;
- the scripted agent ``demo-support-agent`` (looks the customer up over MCP, checks the weather over HTTP, opens a
  ticket over HTTP) and the workflow ``demo-support`` that runs it;
- the model-backed agent ``demo.support-model`` version ``1.0.0`` on the mock provider (no credentials: its
  scripted answers react to the customer named in the ticket, as a model would) and the workflow
  ``demo-support-model`` that runs it on its ``ticket`` input.

A run of ``demo-support`` calls both servers for real; a replay fork of it serves every answer from the recording
and the servers see no request (``GET <demo tools>/hits`` shows the count).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.local.demo_tools import DemoToolServer
from shared.ports import Ports

DEMO_WORKFLOW = "demo-support"
DEMO_AGENT = "demo-support-agent"
DEMO_SERVER_ID = "demo"
DEMO_MODEL_AGENT = "demo.support-model"
DEMO_MODEL_WORKFLOW = "demo-support-model"


@dataclass
class Demo:
    tools: DemoToolServer
    tools_url: str
    mcp: Any
    mcp_url: str

    def stop(self) -> None:
        self.tools.stop()
        self.mcp.stop()


def _http_tools(url: str) -> list[dict[str, Any]]:
    return [
        {"toolId": "demo.crm:lookup", "title": "Customer lookup", "description": "A customer's record by id",
         "source": {"kind": "http", "url": f"{url}/crm/lookup", "method": "POST"}, "safetyTier": "read",
         "replayPolicy": "deterministic",
         "inputSchema": {"type": "object", "properties": {"customerId": {"type": "string"}},
                         "required": ["customerId"], "additionalProperties": False}},
        {"toolId": "demo.desk:ticket", "title": "Open a ticket", "description": "Opens a support ticket",
         "source": {"kind": "http", "url": f"{url}/tickets", "method": "POST"}, "replayPolicy": "idempotent",
         "inputSchema": {"type": "object", "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
                         "required": ["title"], "additionalProperties": False}},
        {"toolId": "demo.meteo:weather", "title": "Weather", "description": "Today's forecast for a city",
         "source": {"kind": "http", "url": f"{url}/weather", "method": "GET"},
         "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                         "additionalProperties": False}},
    ]


AGENT = {
    "agentId": DEMO_AGENT,
    "kind": "scripted",
    "description": "Looks the customer up (MCP), checks the weather (HTTP), opens a ticket (HTTP)",
    "script": {
        "calls": [
            {"tool": f"mcp:{DEMO_SERVER_ID}.lookup_customer", "args": {"id": "c-1"}},
            {"tool": "demo.meteo:weather", "args": {"city": "Oslo"}},
            {"tool": "demo.desk:ticket", "args": {"title": "Refund for c-1", "body": "Order 1234 arrived broken"}},
        ],
        "answer": "ticket opened",
    },
}

WORKFLOW = {
    "id": DEMO_WORKFLOW,
    "name": "Demo: a support agent calling real tools",
    "version": "1.0",
    "nodes": [{"id": "support", "typeId": "core.agent", "name": "Support agent", "position": {"x": 0, "y": 0},
               "config": {"agentId": DEMO_AGENT}, "inputs": {}}],
    "edges": [],
    "triggers": [{"id": "manual", "type": "manual", "enabled": True}],
    "variables": [],
    "metadata": {},
    "settings": {},
}


def _answers(customer: str) -> list[dict[str, Any]]:
    return [{"toolCalls": [{"name": f"mcp:{DEMO_SERVER_ID}.lookup_customer", "arguments": {"id": customer}}]},
            {"toolCalls": [{"name": "demo.desk:ticket", "arguments": {"title": f"Refund for {customer}"}}]},
            {"text": "ticket opened"}]


MODEL_AGENT = {
    "version": "1.0.0",
    "manifest": {"agentId": DEMO_MODEL_AGENT, "persona": "Support resolver", "modelClass": "general",
                 "description": "Looks the customer up (MCP) and opens a refund ticket (HTTP)",
                 "systemPrompt": "You resolve support tickets. Look the customer up, then open a ticket.",
                 "toolAllowlist": [f"mcp:{DEMO_SERVER_ID}.lookup_customer", "demo.desk:ticket"]},
    "model": {"provider": "mock", "model": "demo-model",
              "mockProvider": {"script": [{"text": "I need a customer id."}],
                               "cases": [{"whenInput": c, "script": _answers(c)} for c in ("c-1", "c-2", "c-3")]}},
    "maxTurns": 6,
}

MODEL_WORKFLOW = {
    "id": DEMO_MODEL_WORKFLOW,
    "name": "Demo: a model-backed support agent calling real tools",
    "version": "1.0",
    "nodes": [{"id": "support", "typeId": "core.agent", "name": "Support agent", "position": {"x": 0, "y": 0},
               "agent": {"agentId": DEMO_MODEL_AGENT}, "config": {},
               "inputs": {"input": {"type": "variable", "variableName": "ticket"}}}],
    "edges": [],
    "triggers": [{"id": "manual", "type": "manual", "enabled": True}],
    "variables": [{"name": "ticket", "type": "string", "required": True}],
    "metadata": {},
    "settings": {},
}


def start_demo(ports: Ports, tenants: list[str], base_port: int = 0) -> Demo:
    """Start both demo servers on loopback and register them for each tenant.

    With the host on ``base_port`` (not 0), the HTTP tool server listens on ``base_port + 1`` and the MCP server on
    ``base_port + 2`` (8788 and 8789 for the default 8787); with 0, on ephemeral ports.
    """
    from shared.local.demo_mcp import DemoMcpServer
    from shared.protocol.agents import AgentRegistration
    from shared.protocol.tools import McpServerRegistration, ToolRegistration
    from shared.services import agents, tools
    from shared.services.common import Caller
    from shared.services.workflows import register_workflow

    http = DemoToolServer()
    http_url = http.start(port=base_port + 1 if base_port else 0)
    mcp = DemoMcpServer(port=base_port + 2 if base_port else 0)
    mcp_url = mcp.start()
    for tenant in tenants:
        caller = Caller(tenant, "local-demo")
        for doc in _http_tools(http_url):
            tools.register_tool(ports, caller, ToolRegistration.model_validate(doc))
        tools.register_mcp_server(ports, caller, McpServerRegistration.model_validate({
            "serverId": DEMO_SERVER_ID, "url": mcp_url, "description": "The local demo MCP server",
            "tools": {"lookup_customer": {"safetyTier": "read", "replayPolicy": "deterministic"}}}))
        ports.host.put_item(f"AGENT#{tenant}", DEMO_AGENT, AGENT)
        register_workflow(ports, tenant, WORKFLOW)
        agents.register_agent(ports, caller, AgentRegistration.model_validate(MODEL_AGENT))
        register_workflow(ports, tenant, MODEL_WORKFLOW)
    return Demo(http, http_url, mcp, mcp_url)
