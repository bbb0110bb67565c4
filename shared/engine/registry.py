"""Registries of node types, tools and agents, each declaring its replay role and effect seams.

The effect-seam manifest and the replay classifier are both read from here, so a
new node type or tool cannot reach an outbound path without being listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["pure", "side-effect"]


@dataclass(frozen=True)
class Seam:
    seam: str
    kind: str  # http | smtp | queue | storage | provider-sdk | webhook-fanout | other
    guarded_by: str
    branch_re_fires: bool = True
    note: str | None = None


SEAM_HTTP = Seam(
    "http.fetch",
    "http",
    "EffectGuard (default-deny in replay) + host allowlist; core.http resolves its recorded node outcome in replay",
)
SEAM_COUNTER = Seam(
    "storage.conformance-counter",
    "storage",
    "EffectGuard (default-deny in replay); agent tool calls resolve from the source run's as-executed tool-call record",
)
SEAM_LEDGER = Seam(
    "storage.effect-ledger",
    "storage",
    "EffectGuard (default-deny in replay); "
    "core.conformance.side-effect resolves the source's n-th recorded terminal outcome",
)

SEAM_TOOL_HTTP = Seam(
    "tool.http",
    "http",
    "EffectGuard (default-deny in replay) + the egress guard; each call is claimed "
    "while the run is writable, keyed (Idempotency-Key) and recorded as executed; replay and RFC 0252 "
    "fixtures serve the recorded outcome",
    note="registered HTTP tools (POST /host/openwop-serverless/tools)",
)
SEAM_TOOL_MCP = Seam(
    "tool.mcp",
    "http",
    "EffectGuard (default-deny in replay) + the egress guard; each tools/call is "
    "claimed while the run is writable, keyed (_meta openwop/idempotencyKey) and recorded as executed; "
    "replay and RFC 0252 fixtures serve the recorded outcome",
    note="MCP servers (POST /host/openwop-serverless/mcp-servers), streamable HTTP",
)
SEAM_CREDENTIALS = Seam(
    "secrets.credentials",
    "provider-sdk",
    "read-only GetSecretValue of the calling tenant's own "
    "credential path; never fires in replay because no tool call is sent in replay",
    branch_re_fires=True,
    note="AWS Secrets Manager reads of tool credentials (no write, no effect)",
)
SEAM_WEBHOOKS = Seam(
    "webhook.fanout",
    "webhook-fanout",
    "fan-out from the events table's stream reads replay-ness "
    "from the run item (never the event type): a replay fork delivers nothing, a branch fork nothing "
    "of its copied prefix [0, fromSeq); deliveries are keyed by (webhookId, runId, sequence)",
    branch_re_fires=True,
    note="signed POSTs to registered webhooks (POST /webhooks) through the SQS delivery queue and the egress guard",
)
# Outbound paths that belong to no single node type or built-in tool: registered tools and their credentials, and
# the webhook deliveries of stored events.
TRANSPORT_SEAMS = (SEAM_TOOL_HTTP, SEAM_TOOL_MCP, SEAM_CREDENTIALS, SEAM_WEBHOOKS)

_MODEL_REPLAY = (
    "in replay model answers are served from the run's content-addressed model-call log, never called; "
    "a request missing from the log is a divergence (fail closed), never a live call"
)
SEAM_MODEL_BEDROCK = Seam(
    "model.bedrock",
    "provider-sdk",
    f"EffectGuard (default-deny in replay); {_MODEL_REPLAY}",
    note="Amazon Bedrock Converse (boto3 bedrock-runtime, the function role's credentials)",
)
SEAM_MODEL_OPENAI = Seam(
    "model.openai",
    "provider-sdk",
    f"EffectGuard (default-deny in replay) + the egress guard; {_MODEL_REPLAY}",
    note="OpenAI-compatible chat completions (POST {baseUrl}/chat/completions)",
)
# Model providers that leave the process (the mock provider answers in-process and is no seam).
PROVIDER_SEAMS = (SEAM_MODEL_BEDROCK, SEAM_MODEL_OPENAI)


@dataclass(frozen=True)
class NodeType:
    type_id: str
    role: Role
    seams: tuple[Seam, ...] = ()
    conformance: bool = False
    description: str = ""


MCP_CLIENT_NODE = "core.conformance.mcp-client"  # RFC 0204's conformance-reserved ctx.mcp node

NODE_TYPES: dict[str, NodeType] = {
    nt.type_id: nt
    for nt in (
        NodeType("core.noop", "pure", description="completes at once with {}"),
        NodeType(
            "core.conformance.hold",
            "pure",
            conformance=True,
            description="waits inputs.delayMs, outputs equal its inputs, stops on cancel",
        ),
        NodeType(
            "core.conformance.side-effect",
            "side-effect",
            (SEAM_LEDGER,),
            conformance=True,
            description="records one effect-ledger row per execution",
        ),
        NodeType("core.agent", "pure", description="invokes config.agentId; each tool call is resolved in replay"),
        NodeType(
            "core.tool",
            "side-effect",
            (SEAM_TOOL_HTTP, SEAM_TOOL_MCP),
            description="calls config.tool with its inputs as args",
        ),
        NodeType("core.http", "side-effect", (SEAM_HTTP,), description="an allowlisted HTTP request"),
        NodeType(
            "core.approvalGate",
            "pure",
            description="suspends on an approval interrupt until it is resolved; "
            "a replay takes the source's recorded resolution",
        ),
        NodeType(
            MCP_CLIENT_NODE,
            "side-effect",
            (SEAM_TOOL_MCP,),
            conformance=True,
            description="ctx.mcp.<method> (callTool, listTools, readResource, serverHealth) against a "
            "registered MCP server with the run's inputs; outputs.result is the resolved value verbatim",
        ),
    )
}


@dataclass(frozen=True)
class ToolDescriptor:
    name: str
    role: Role
    seams: tuple[Seam, ...] = ()
    conformance: bool = False
    description: str = ""


COUNTER_TOOL = "conformance.eval:counter"
ECHO_TOOL = "conformance.eval:echo"
FAIL_TOOL = "conformance.eval:fail"

TOOLS: dict[str, ToolDescriptor] = {
    t.name: t
    for t in (
        ToolDescriptor(
            COUNTER_TOOL,
            "side-effect",
            (SEAM_COUNTER,),
            conformance=True,
            description="{op: inc|read, key} -> {key, count}; per tenant, persistent",
        ),
        ToolDescriptor(ECHO_TOOL, "pure", conformance=True, description="returns its args"),
        ToolDescriptor(FAIL_TOOL, "pure", conformance=True, description="always raises (an error outcome)"),
    )
}


@dataclass(frozen=True)
class AgentSpec:
    agent_id: str
    kind: Literal["scripted", "model"] = "scripted"
    script: dict[str, Any] | None = None  # None: the script comes from the invocation input
    tool_allowlist: tuple[str, ...] | None = None
    content_free: bool = False
    conformance: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    # A model-backed agent (a registered version): what the turn loop sends to its provider.
    version: str | None = None
    system_prompt: str = ""
    model: dict[str, Any] | None = None  # {provider, model, temperature?, maxTokens?, credentialRef?, baseUrl?, ...}
    max_turns: int = 8
    model_class: str | None = None
    # {"kind": "host" | "external", "endpoint"?: {...}}: an external agent runs elsewhere, through the gateway
    runtime: dict[str, Any] | None = None

    @property
    def external(self) -> bool:
        return (self.runtime or {}).get("kind") == "external"


CONFORMANCE_AGENT = "conformance-eval-agent"
CONFORMANCE_AGENT_CONTENT_FREE = "conformance-eval-agent-content-free"

AGENTS: dict[str, AgentSpec] = {
    a.agent_id: a
    for a in (
        AgentSpec(CONFORMANCE_AGENT, conformance=True),
        AgentSpec(CONFORMANCE_AGENT_CONTENT_FREE, content_free=True, conformance=True),
    )
}


class AgentDefinitionError(ValueError):
    pass


def agent_from_json(doc: Any) -> AgentSpec:
    """A user-defined scripted agent: {agentId, kind: "scripted", script?, toolAllowlist?, contentFree?}."""
    from shared.protocol.ids import NAME_ID_RE

    if not isinstance(doc, dict) or not isinstance(doc.get("agentId"), str) or not NAME_ID_RE.match(doc["agentId"]):
        raise AgentDefinitionError("agentId is missing or malformed")
    if doc.get("kind", "scripted") != "scripted":
        raise AgentDefinitionError("only scripted agents are supported")
    unknown = set(doc) - {"agentId", "kind", "script", "toolAllowlist", "contentFree", "description"}
    if unknown:
        raise AgentDefinitionError("unknown agent keys")
    script = doc.get("script")
    if script is not None:
        validate_script(script)
    allow = doc.get("toolAllowlist")
    if allow is not None and (not isinstance(allow, list) or not all(isinstance(x, str) for x in allow)):
        raise AgentDefinitionError("toolAllowlist must be a list of tool names")
    return AgentSpec(
        doc["agentId"],
        script=script,
        tool_allowlist=tuple(allow) if allow is not None else None,
        content_free=bool(doc.get("contentFree", False)),
    )


def agent_from_version(doc: dict[str, Any]) -> AgentSpec:
    """A registered model-backed agent version (``{version, manifest, model, maxTurns}``, validated at registration)."""
    manifest = doc["manifest"]
    return AgentSpec(
        str(manifest["agentId"]),
        kind="model",
        tool_allowlist=tuple(manifest.get("toolAllowlist") or ()),
        version=str(doc["version"]),
        system_prompt=str(manifest.get("systemPrompt", "")),
        model=dict(doc["model"]),
        max_turns=int(doc.get("maxTurns", 8)),
        model_class=manifest.get("modelClass"),
        runtime=dict(doc["runtime"]) if isinstance(doc.get("runtime"), dict) else None,
    )


def validate_script(script: Any) -> None:
    if not isinstance(script, dict):
        raise AgentDefinitionError("script must be an object")
    calls = script.get("calls", [])
    if not isinstance(calls, list):
        raise AgentDefinitionError("script.calls must be a list")
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("tool"), str):
            raise AgentDefinitionError("each script call needs a tool name")
