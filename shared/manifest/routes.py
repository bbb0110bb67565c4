"""The route table: the API Gateway (HTTP API) routes and the function each one invokes.

The CDK stack (``infra/``) deploys it and the local front (``shared/local/front.py``) serves it, so deployed and local
routing cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Route:
    """An API Gateway (HTTP API, payload v2) route. ``path`` uses ``{name}`` for one whole segment."""

    method: str
    path: str
    function: str
    auth: bool = True
    streaming: bool = False
    carries: tuple[str, ...] = ()
    """The operation paths this route serves when they are not just its own path: API Gateway route keys have no
    ``:``, so a ``:verb`` operation (``/runs/{runId}:fork``) rides the route of its resource."""

    @property
    def key(self) -> str:
        """The API Gateway route key: ``METHOD /path``, or ``$default`` for the catch-all."""
        return DEFAULT_ROUTE if self.path == DEFAULT_ROUTE else f"{self.method} {self.path}"

    @property
    def operations(self) -> tuple[str, ...]:
        """The operation paths (as the OpenAPI document names them) this route serves; none for ``$default``."""
        return () if self.path == DEFAULT_ROUTE else self.carries or (self.path,)


RUN_ID = "{runId}"
DEFAULT_ROUTE = "$default"
SEAMS_PATH = "/conformance/seams/"
# RFC 0158's durability test hook: a fixed path outside the seams profile's prefix, served with that profile only.
DURABILITY_PATH = "/host/durability/"
ROUTES: tuple[Route, ...] = (
    Route("GET", "/.well-known/openwop", "get_capabilities", auth=False),
    Route("GET", "/openapi.json", "get_openapi", auth=False),
    Route("POST", "/runs", "create_run"),
    Route("GET", "/runs", "list_runs"),
    Route("GET", f"/runs/{RUN_ID}", "get_run", carries=(f"/runs/{RUN_ID}", f"/runs/{RUN_ID}:diff")),
    Route(
        "POST",
        f"/runs/{RUN_ID}",
        "run_actions",
        carries=(f"/runs/{RUN_ID}:fork", f"/runs/{RUN_ID}:pause", f"/runs/{RUN_ID}:resume"),
    ),
    Route("DELETE", f"/runs/{RUN_ID}", "delete_run"),
    Route("POST", f"/runs/{RUN_ID}/cancel", "cancel_run"),
    Route("GET", f"/runs/{RUN_ID}/events", "stream_run_events", streaming=True),
    Route("GET", f"/runs/{RUN_ID}/events/poll", "poll_run_events"),
    Route("GET", f"/runs/{RUN_ID}/effects", "get_run"),
    Route("GET", f"/runs/{RUN_ID}/eval-summary", "get_eval_summary"),
    Route("GET", f"/host/openwop-serverless/runs/{RUN_ID}/eval-report", "get_eval_report"),
    Route("GET", "/host/openwop-serverless/eval-runs", "get_eval_report"),
    # The viewer page (static; it calls the API with a key the user pastes): no auth on the page itself. A route
    # path cannot end with "/", so ".../ui/" reaches $default, whose function serves the same page.
    Route("GET", "/host/openwop-serverless/ui", "get_ui", auth=False),
    Route("GET", "/workflows/{workflowId}", "get_workflow"),
    Route("GET", "/host/effect-seams", "get_effect_seams"),
    Route("POST", "/host/openwop-serverless/eval-suites", "put_eval_suite"),
    # Eval suites as a tenant's resource (issue 24): list, read, delete a version, build one from recorded runs.
    Route("GET", "/host/openwop-serverless/eval-suites", "manage_eval_suites"),
    Route("GET", "/host/openwop-serverless/eval-suites/{suiteId}", "manage_eval_suites"),
    Route(
        "POST",
        "/host/openwop-serverless/eval-suites/{suiteId}",
        "manage_eval_suites",
        carries=(
            "/host/openwop-serverless/eval-suites/{suiteId}:from-runs",
            "/host/openwop-serverless/eval-suites/{suiteId}:publish",
            "/host/openwop-serverless/eval-suites/{suiteId}:accept",
        ),
    ),
    Route("GET", "/host/openwop-serverless/eval-suites/{suiteId}/rules", "manage_eval_suites"),
    Route("POST", "/host/openwop-serverless/eval-suites/{suiteId}/rules", "manage_eval_suites"),
    Route("DELETE", "/host/openwop-serverless/eval-suites/{suiteId}/rules/{ruleId}", "manage_eval_suites"),
    Route("GET", "/host/openwop-serverless/eval-suites/{suiteId}/draft", "manage_eval_suites"),
    Route("GET", "/host/openwop-serverless/eval-suites/{suiteId}/versions/{version}", "manage_eval_suites"),
    Route("DELETE", "/host/openwop-serverless/eval-suites/{suiteId}/versions/{version}", "manage_eval_suites"),
    Route("GET", "/tools", "get_tools"),
    Route("GET", "/tools/{toolId}", "get_tools"),
    Route("POST", "/host/openwop-serverless/tools", "manage_tools"),
    Route("DELETE", "/host/openwop-serverless/tools/{toolId}", "manage_tools"),
    Route("POST", "/host/openwop-serverless/mcp-servers", "manage_tools"),
    Route("GET", "/host/openwop-serverless/mcp-servers", "manage_tools"),
    Route("DELETE", "/host/openwop-serverless/mcp-servers/{serverId}", "manage_tools"),
    Route("PUT", "/host/openwop-serverless/credentials/{credentialRef}", "manage_credentials"),
    Route("GET", "/host/openwop-serverless/credentials", "manage_credentials"),
    Route("GET", "/host/openwop-serverless/credentials/{credentialRef}", "manage_credentials"),
    Route("DELETE", "/host/openwop-serverless/credentials/{credentialRef}", "manage_credentials"),
    Route("POST", "/host/openwop-serverless/agents", "manage_agents"),
    Route("GET", "/agents", "manage_agents"),
    Route("GET", "/agents/{agentId}", "manage_agents"),
    Route("GET", "/agents/{agentId}/deployments", "manage_agents"),
    Route("POST", "/agents/{agentId}/deployments", "manage_agents"),
    # Safe channels (issue 24): a channel back to its previous deployment, and every change of what it serves.
    Route(
        "POST",
        "/host/openwop-serverless/agents/{agentId}/deployments/{channel}",
        "manage_agents",
        carries=("/host/openwop-serverless/agents/{agentId}/deployments/{channel}:rollback",),
    ),
    Route("GET", "/host/openwop-serverless/agents/{agentId}/deployments/{channel}/history", "manage_agents"),
    Route("POST", "/host/openwop-serverless/workflows", "register_workflow"),
    Route("GET", "/host/openwop-serverless/workflows", "list_workflows"),
    Route("DELETE", "/host/openwop-serverless/workflows/{workflowId}", "delete_workflow"),
    # "/runs:bulk-cancel": one whole segment with a verb; cancel_run matches the verb inside (no ":" in route keys)
    Route("POST", "/{collection}", "cancel_run", carries=("/runs:bulk-cancel",)),
    Route("POST", f"/runs/{RUN_ID}/interrupts/{{nodeId}}", "interrupts"),
    Route("GET", "/interrupts/{token}", "interrupts", auth=False),
    Route("POST", "/interrupts/{token}", "interrupts", auth=False),
    Route("POST", f"/host/openwop-serverless/runs/{RUN_ID}/interrupts/{{nodeId}}/token", "interrupts"),
    # Webhooks (spec paths, webhooks.md): tenant-scoped subscriptions, signed durable delivery.
    Route("POST", "/webhooks", "manage_webhooks"),
    Route("GET", "/webhooks", "manage_webhooks"),  # the caller's subscriptions (this host's; no spec operation)
    Route("DELETE", "/webhooks/{webhookId}", "manage_webhooks"),
    Route("POST", "/webhooks/{webhookId}/rotate-secret", "manage_webhooks"),
    Route("GET", "/webhooks/{webhookId}/dead-letters", "manage_webhooks"),
    # The conformance seams profile (api/seams-v2.yaml): routed always, served only with OPENWOP_CONFORMANCE_SEAMS
    # (CDK context conformanceSeams, off by default); without it every request is the 404 of a path never served.
    Route("POST", f"{SEAMS_PATH}sample/event-log/seed", "conformance_seams"),
    Route("POST", f"{SEAMS_PATH}sample/effect-seams/fire", "conformance_seams"),
    Route("POST", f"{SEAMS_PATH}sample/mcp/invoke", "conformance_seams"),
    Route("GET", f"{DURABILITY_PATH}kill", "conformance_seams"),  # the hook's probe (fires nothing)
    Route("POST", f"{DURABILITY_PATH}kill", "conformance_seams"),
    # Anything no route matches still answers the protocol's 404 envelope (not API Gateway's own body).
    Route("ANY", DEFAULT_ROUTE, "not_found", auth=False),
)
