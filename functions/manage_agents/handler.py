"""Model-backed agents: register a version (host extension) and read the inventory (RFC 0072 §A).

POST /host/openwop-serverless/agents (201 a new version, 200 the identical version, 409 version_conflict);
GET /agents; GET /agents/{agentId} (the latest version's inventory entry, never the system prompt);
GET|POST /agents/{agentId}/deployments (RFC 0082 records and transitions, the eval promotion gate);
POST /host/openwop-serverless/agents/{agentId}/deployments/{channel}:rollback (the channel's previous deployment) and
GET .../deployments/{channel}/history (every change of what the channel serves);
POST /host/openwop-serverless/agents/{agentId}/sessions (a session of an external agent, decision 0143).
"""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import agents, deployments

app = api.build_resolver()


@app.post("/host/openwop-serverless/agents")
def register_agent() -> Response[str]:
    from shared.protocol.agents import AgentRegistration

    caller = api.caller(app)
    status, body = agents.register_agent(api.ports(), caller, api.parse(app, AgentRegistration))
    return api.reply(status, body)


@app.post("/host/openwop-serverless/agents/<agent_id>/sessions")
def create_session(agent_id: str) -> Response[str]:
    from shared.protocol.agents import SessionRequest
    from shared.services import agent_sessions

    caller = api.caller(app)
    body = api.parse(app, SessionRequest)
    status, out = agent_sessions.create_session(api.ports(), caller, api.segment(agent_id), body, api.origin(app))
    return api.reply(status, out)


@app.get("/agents")
def list_agents() -> Response[str]:
    return api.reply(200, agents.list_agents(api.ports(), api.caller(app)))


@app.get("/agents/<agent_id>")
def get_agent(agent_id: str) -> Response[str]:
    return api.reply(200, agents.get_agent(api.ports(), api.caller(app), api.segment(agent_id)))


@app.get("/agents/<agent_id>/deployments")
def list_deployments(agent_id: str) -> Response[str]:
    return api.reply(200, deployments.list_deployments(api.ports(), api.caller(app), api.segment(agent_id)))


@app.post("/agents/<agent_id>/deployments")
def transition_deployment(agent_id: str) -> Response[str]:
    from shared.protocol.agents import DeploymentTransition

    caller = api.caller(app)
    body = api.parse(app, DeploymentTransition)
    return api.reply(200, deployments.transition(api.ports(), caller, api.segment(agent_id), body))


@app.post("/host/openwop-serverless/agents/<agent_id>/deployments/<channel>:rollback")
def rollback_channel(agent_id: str, channel: str) -> Response[str]:
    caller = api.caller(app)
    return api.reply(
        200, deployments.rollback_channel(api.ports(), caller, api.segment(agent_id), api.segment(channel))
    )


@app.get("/host/openwop-serverless/agents/<agent_id>/deployments/<channel>/history")
def channel_history(agent_id: str, channel: str) -> Response[str]:
    return api.reply(
        200, deployments.channel_history(api.ports(), api.caller(app), api.segment(agent_id), api.segment(channel))
    )


lambda_handler = api.make_handler(app)
