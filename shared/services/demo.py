"""The demo: a scripted support agent, the workflow that runs it, and the registrations of the tools it calls.

One definition for both places the demo is seeded: the local host (``make serve``, with tool servers on loopback,
``shared/local/demo.py``) and a deployed stack (``seed=demo`` in CDK context, or ``openwop-serverless seed``),
where the tool servers are wherever the operator runs them (``demoToolsUrl``, ``demoMcpUrl``). For each tenant:

- HTTP tools ``demo.crm:lookup`` (POST), ``demo.desk:ticket`` (POST, idempotent) and ``demo.meteo:weather`` (GET)
  on the HTTP tool server;
- the MCP server ``demo``, so its tools are ``mcp:demo.lookup_customer``, ``mcp:demo.create_ticket`` and
  ``mcp:demo.fail_always`` (registering it lists the server: it must be reachable from where seeding runs);
- the scripted agent ``demo-support-agent`` (looks the customer up over MCP, checks the weather over HTTP, opens a
  ticket over HTTP) and the workflow ``demo-support`` that runs it;
- where mock providers are served, the model-backed agent ``demo.support-model`` version ``1.0.0`` on the mock
  provider (no credentials: its scripted answers react to the customer named in the ticket, as a model would) and
  the workflow ``demo-support-model`` that runs it on its ``ticket`` input.

Seeding again with the same URLs changes nothing; another URL under the same tool version is a 409 conflict.
"""

from __future__ import annotations

from typing import Any

from shared.ports import Ports

DEMO_WORKFLOW = "demo-support"
DEMO_AGENT = "demo-support-agent"
DEMO_SERVER_ID = "demo"
DEMO_MODEL_AGENT = "demo.support-model"
DEMO_MODEL_WORKFLOW = "demo-support-model"


def http_tools(url: str) -> list[dict[str, Any]]:
    """The demo HTTP tool registrations for a tool server at ``url``."""
    url = url.rstrip("/")
    return [
        {
            "toolId": "demo.crm:lookup",
            "title": "Customer lookup",
            "description": "A customer's record by id",
            "source": {"kind": "http", "url": f"{url}/crm/lookup", "method": "POST"},
            "safetyTier": "read",
            "replayPolicy": "deterministic",
            "inputSchema": {
                "type": "object",
                "properties": {"customerId": {"type": "string"}},
                "required": ["customerId"],
                "additionalProperties": False,
            },
        },
        {
            "toolId": "demo.desk:ticket",
            "title": "Open a ticket",
            "description": "Opens a support ticket",
            "source": {"kind": "http", "url": f"{url}/tickets", "method": "POST"},
            "replayPolicy": "idempotent",
            "inputSchema": {
                "type": "object",
                "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
                "required": ["title"],
                "additionalProperties": False,
            },
        },
        {
            "toolId": "demo.meteo:weather",
            "title": "Weather",
            "description": "Today's forecast for a city",
            "source": {"kind": "http", "url": f"{url}/weather", "method": "GET"},
            "inputSchema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    ]


def mcp_server(url: str) -> dict[str, Any]:
    """The demo MCP server registration for a server at ``url``."""
    return {
        "serverId": DEMO_SERVER_ID,
        "url": url,
        "description": "The demo MCP server",
        "tools": {"lookup_customer": {"safetyTier": "read", "replayPolicy": "deterministic"}},
    }


AGENT: dict[str, Any] = {
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

WORKFLOW: dict[str, Any] = {
    "id": DEMO_WORKFLOW,
    "name": "Demo: a support agent calling real tools",
    "version": "1.0",
    "nodes": [
        {
            "id": "support",
            "typeId": "core.agent",
            "name": "Support agent",
            "position": {"x": 0, "y": 0},
            "config": {"agentId": DEMO_AGENT},
            "inputs": {},
        }
    ],
    "edges": [],
    "triggers": [{"id": "manual", "type": "manual", "enabled": True}],
    "variables": [],
    "metadata": {},
    "settings": {},
}


def _answers(customer: str) -> list[dict[str, Any]]:
    return [
        {"toolCalls": [{"name": f"mcp:{DEMO_SERVER_ID}.lookup_customer", "arguments": {"id": customer}}]},
        {"toolCalls": [{"name": "demo.desk:ticket", "arguments": {"title": f"Refund for {customer}"}}]},
        {"text": "ticket opened"},
    ]


MODEL_AGENT = {
    "version": "1.0.0",
    "manifest": {
        "agentId": DEMO_MODEL_AGENT,
        "persona": "Support resolver",
        "modelClass": "general",
        "description": "Looks the customer up (MCP) and opens a refund ticket (HTTP)",
        "systemPrompt": "You resolve support tickets. Look the customer up, then open a ticket.",
        "toolAllowlist": [f"mcp:{DEMO_SERVER_ID}.lookup_customer", "demo.desk:ticket"],
    },
    "model": {
        "provider": "mock",
        "model": "demo-model",
        "mockProvider": {
            "script": [{"text": "I need a customer id."}],
            "cases": [{"whenInput": c, "script": _answers(c)} for c in ("c-1", "c-2", "c-3")],
        },
    },
    "maxTurns": 6,
}

MODEL_WORKFLOW = {
    "id": DEMO_MODEL_WORKFLOW,
    "name": "Demo: a model-backed support agent calling real tools",
    "version": "1.0",
    "nodes": [
        {
            "id": "support",
            "typeId": "core.agent",
            "name": "Support agent",
            "position": {"x": 0, "y": 0},
            "agent": {"agentId": DEMO_MODEL_AGENT},
            "config": {},
            "inputs": {"input": {"type": "variable", "variableName": "ticket"}},
        }
    ],
    "edges": [],
    "triggers": [{"id": "manual", "type": "manual", "enabled": True}],
    "variables": [{"name": "ticket", "type": "string", "required": True}],
    "metadata": {},
    "settings": {},
}


def seed_demo(ports: Ports, tenant: str, tools_url: str, mcp_url: str) -> list[str]:
    """Register the demo tools, MCP server, agent and workflow for ``tenant``; the ids registered.

    Refusals (an unreachable MCP server, a URL the egress guard refuses, a conflicting tool version) raise the
    service's ``ProtocolError``, as the HTTP extensions would answer them."""
    from shared.protocol.tools import McpServerRegistration, ToolRegistration
    from shared.services import tools
    from shared.services.common import Caller
    from shared.services.workflows import register_workflow

    caller = Caller(tenant, "demo-seed")
    seeded = []
    for doc in http_tools(tools_url):
        tools.register_tool(ports, caller, ToolRegistration.model_validate(doc))
        seeded.append(doc["toolId"])
    tools.register_mcp_server(ports, caller, McpServerRegistration.model_validate(mcp_server(mcp_url)))
    seeded.append(f"mcp:{DEMO_SERVER_ID}")
    ports.agents.put_scripted(tenant, DEMO_AGENT, AGENT)
    seeded.append(DEMO_AGENT)
    seeded.append(register_workflow(ports, tenant, WORKFLOW))
    if ports.settings.mock_providers_allowed:
        from shared.protocol.agents import AgentRegistration
        from shared.services import agents

        agents.register_agent(ports, caller, AgentRegistration.model_validate(MODEL_AGENT))
        seeded.append(DEMO_MODEL_AGENT)
        seeded.append(register_workflow(ports, tenant, MODEL_WORKFLOW))
    return seeded
