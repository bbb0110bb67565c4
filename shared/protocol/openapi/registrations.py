"""What a tenant registers: workflows, tools and MCP servers, credentials, agents and their deployments, webhooks."""

from __future__ import annotations

from shared.protocol.openapi.operation import Op

WORKFLOW_READ: tuple[Op, ...] = (
    Op("GET", "/workflows/{workflowId}", "getWorkflow", "get_workflow", {200: "Object"}, (400, 401, 404, 406)),
)

TOOLS: tuple[Op, ...] = (
    Op("GET", "/tools", "listTools", "get_tools", {200: "ToolList"}, (401, 406)),
    Op("GET", "/tools/{toolId}", "getTool", "get_tools", {200: "ToolDescriptor"}, (401, 404, 406)),
    Op(
        "POST",
        "/host/openwop-serverless/tools",
        "registerTool",
        "manage_tools",
        {200: "ToolDescriptor", 201: "ToolDescriptor"},
        (400, 401, 406, 409, 413, 415),
        body="ToolRegistration",
        registration=True,
    ),
    Op("DELETE", "/host/openwop-serverless/tools/{toolId}", "deleteTool", "manage_tools", {204: None}, (401, 404, 406)),
    Op(
        "POST",
        "/host/openwop-serverless/mcp-servers",
        "registerMcpServer",
        "manage_tools",
        {200: "McpServer", 201: "McpServer"},
        (400, 401, 406, 413, 415),
        body="McpServerRegistration",
        registration=True,
    ),
    Op(
        "GET",
        "/host/openwop-serverless/mcp-servers",
        "listMcpServers",
        "manage_tools",
        {200: "McpServerList"},
        (401, 406),
    ),
    Op(
        "DELETE",
        "/host/openwop-serverless/mcp-servers/{serverId}",
        "deleteMcpServer",
        "manage_tools",
        {204: None},
        (401, 404, 406),
    ),
)

CREDENTIALS: tuple[Op, ...] = (
    Op(
        "PUT",
        "/host/openwop-serverless/credentials/{credentialRef}",
        "putCredential",
        "manage_credentials",
        {200: "Credential", 201: "Credential"},
        (400, 401, 406, 413, 415),
        body="CredentialPut",
        registration=True,
    ),
    Op(
        "GET",
        "/host/openwop-serverless/credentials",
        "listCredentials",
        "manage_credentials",
        {200: "CredentialList"},
        (401, 406),
    ),
    Op(
        "GET",
        "/host/openwop-serverless/credentials/{credentialRef}",
        "getCredential",
        "manage_credentials",
        {200: "Credential"},
        (401, 404, 406),
    ),
    Op(
        "DELETE",
        "/host/openwop-serverless/credentials/{credentialRef}",
        "deleteCredential",
        "manage_credentials",
        {204: None},
        (401, 404, 406),
    ),
)

AGENTS: tuple[Op, ...] = (
    Op(
        "POST",
        "/host/openwop-serverless/agents",
        "registerAgentVersion",
        "manage_agents",
        {200: "AgentInventoryEntry", 201: "AgentInventoryEntry"},
        (400, 401, 403, 406, 409, 413, 415),
        body="AgentRegistration",
        registration=True,
    ),
    Op("GET", "/agents", "listAgents", "manage_agents", {200: "AgentList"}, (401, 406)),
    Op("GET", "/agents/{agentId}", "getAgent", "manage_agents", {200: "AgentInventoryEntry"}, (401, 404, 406)),
    Op(
        "GET",
        "/agents/{agentId}/deployments",
        "listAgentDeployments",
        "manage_agents",
        {200: "AgentDeploymentList"},
        (401, 404, 406),
    ),
    Op(
        "POST",
        "/agents/{agentId}/deployments",
        "transitionAgentDeployment",
        "manage_agents",
        {200: "AgentDeployment"},
        (400, 401, 404, 406, 413, 415, 422),
        body="DeploymentTransition",
        registration=True,
        refusals={422: "EvalGateRefusal"},
    ),
    # Safe channels (issue 24): a channel back to its previous deployment, and every change of what it serves.
    Op(
        "POST",
        "/host/openwop-serverless/agents/{agentId}/deployments/{channel}:rollback",
        "rollbackAgentChannel",
        "manage_agents",
        {200: "ChannelRollback"},
        (400, 401, 404, 406, 409),
        registration=True,
    ),
    Op(
        "GET",
        "/host/openwop-serverless/agents/{agentId}/deployments/{channel}/history",
        "listAgentChannelHistory",
        "manage_agents",
        {200: "ChannelHistory"},
        (400, 401, 404, 406),
    ),
)

WORKFLOWS: tuple[Op, ...] = (
    Op(
        "POST",
        "/host/openwop-serverless/workflows",
        "registerWorkflow",
        "register_workflow",
        {200: "WorkflowRegistration", 201: "WorkflowRegistration"},
        (400, 401, 406, 409, 413, 415, 422),
        body="Object",
        registration=True,
    ),
    Op(
        "GET",
        "/host/openwop-serverless/workflows",
        "listWorkflows",
        "list_workflows",
        {200: "WorkflowList"},
        (400, 401, 406),
        query=("limit", "cursor?workflows"),
    ),
    Op(
        "DELETE",
        "/host/openwop-serverless/workflows/{workflowId}",
        "deleteWorkflow",
        "delete_workflow",
        {204: None},
        (401, 404, 406, 409),
    ),
)

# Webhooks (spec paths, webhooks.md): tenant-scoped subscriptions, signed durable delivery.
WEBHOOKS: tuple[Op, ...] = (
    Op(
        "POST",
        "/webhooks",
        "registerWebhook",
        "manage_webhooks",
        {201: "WebhookRegistration"},
        (400, 401, 406, 409, 413, 415),
        body="RegisterWebhook",
        headers=("Idempotency-Key",),
        registration=True,
    ),
    # the caller's subscriptions (this host's; no spec operation)
    Op(
        "GET",
        "/webhooks",
        "listWebhooks",
        "manage_webhooks",
        {200: "WebhookList"},
        (400, 401, 406),
        query=("limit", "cursor"),
    ),
    Op(
        "DELETE",
        "/webhooks/{webhookId}",
        "unregisterWebhook",
        "manage_webhooks",
        {204: None},
        (400, 401, 403, 404, 406),
    ),
    Op(
        "POST",
        "/webhooks/{webhookId}/rotate-secret",
        "rotateWebhookSecret",
        "manage_webhooks",
        {200: "RotatedWebhookSecret"},
        (400, 401, 403, 404, 406, 413, 415),
        body="RotateWebhookSecret",
        registration=True,
    ),
    Op(
        "GET",
        "/webhooks/{webhookId}/dead-letters",
        "listWebhookDeadLetters",
        "manage_webhooks",
        {200: "WebhookDeadLetterPage"},
        (400, 401, 403, 404, 406),
        query=("limit", "cursor"),
    ),
)
