"""Model-backed agents: register a version (host extension) and read the inventory (RFC 0072 §A).

POST /host/openwop-serverless/agents (201 a new version, 200 the identical version, 409 version_conflict);
GET /agents; GET /agents/{agentId} (the latest version's inventory entry, never the system prompt).
"""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response

from functions._common import api
from shared.protocol.agents import AgentRegistration
from shared.services import agents

app = api.build_resolver()


@app.post("/host/openwop-serverless/agents")
def register_agent() -> Response[str]:
    caller = api.caller(app)
    status, body = agents.register_agent(api.ports(), caller, api.parse(app, AgentRegistration))
    return api.reply(status, body)


@app.get("/agents")
def list_agents() -> Response[str]:
    return api.reply(200, agents.list_agents(api.ports(), api.caller(app)))


@app.get("/agents/<agent_id>")
def get_agent(agent_id: str) -> Response[str]:
    return api.reply(200, agents.get_agent(api.ports(), api.caller(app), api.segment(agent_id)))


lambda_handler = api.make_handler(app)
