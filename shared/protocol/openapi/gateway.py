"""External agents (decision 0143): sessions, and the gateway an agent's own code reaches the host through.

The gateway's operations (``G`` = ``/host/openwop-serverless/gateway/{gatewayId}``, ``gatewayId`` the projected run
id) ride one route, ``POST G/{rest+}``, on the ``agent_gateway`` function; on AWS that function's own function URL
serves them too, and it is the base of the URLs a session hands out (``SERVED_AT``). They take the session's bearer token
(``owg_...``), never an API key, so the document marks them without the API-key security scheme.
"""

from __future__ import annotations

from shared.protocol.openapi.operation import Op

GATEWAY_ROOT = "/host/openwop-serverless/gateway/{gatewayId}"
GATEWAY_ROUTE = f"{GATEWAY_ROOT}/{{rest+}}"
_GATEWAY_ERRORS = (400, 401, 404, 406, 409, 410, 413, 415)
# Where the gateway lives (decision 0143, "On AWS"): the document's paths are under the API's base, but the URLs a
# session hands out are under GATEWAY_URL when it is set.
SERVED_AT = (
    "Served at the URL a session's answer gives (mcpUrl, openaiBaseUrl, completeUrl). On AWS their base is "
    "GATEWAY_URL, the agent gateway's own Lambda function URL (no 30 s cap); the API's base also routes this path, "
    "within API Gateway's 30 s. Locally the base is the host's own. Authenticated by the session's bearer token, "
    "never an API key."
)

SESSIONS: tuple[Op, ...] = (
    Op(
        "POST",
        "/host/openwop-serverless/agents/{agentId}/sessions",
        "createAgentSession",
        "manage_agents",
        {201: "AgentSession"},
        (400, 401, 403, 404, 406, 409, 413, 415),
        body="SessionRequest",
    ),
    Op(
        "POST",
        "/host/openwop-serverless/runs/{runId}/session",
        "getRunSession",
        "run_actions",
        {200: "AgentSession"},
        (400, 401, 403, 404, 406, 409),
    ),
)

GATEWAY: tuple[Op, ...] = (
    Op(
        "POST",
        f"{GATEWAY_ROOT}/mcp",
        "gatewayMcp",
        "agent_gateway",
        {200: "Object", 202: None},
        _GATEWAY_ERRORS,
        body="Object",
        route_path=GATEWAY_ROUTE,
        auth=False,
        refusals={status: "McpRefusal" for status in (400, 404, 406, 409, 413, 415)},
        description=SERVED_AT,
    ),
    Op(
        "POST",
        f"{GATEWAY_ROOT}/v1/chat/completions",
        "gatewayChatCompletions",
        "agent_gateway",
        {200: "Object"},
        (*_GATEWAY_ERRORS, 403, 429, 502, 503),  # the provider's failures (decision 0144)
        body="Object",
        route_path=GATEWAY_ROUTE,
        auth=False,
        description=SERVED_AT,
    ),
    Op(
        "POST",
        f"{GATEWAY_ROOT}/complete",
        "gatewayComplete",
        "agent_gateway",
        {200: "SessionCompletion"},
        _GATEWAY_ERRORS,
        body="SessionComplete",
        route_path=GATEWAY_ROUTE,
        auth=False,
        description=SERVED_AT,
    ),
)
