"""Ports: the narrow interfaces the engine and services depend on, one module per subject.

Implementations live in ``shared.storage`` / ``shared.orchestration`` / ``shared.transports`` (real AWS or moto)
and are built only by ``shared.wiring``. Every public name is re-exported here: callers import from
``shared.ports``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.ports.agents import AgentRepository, DeploymentRepository
from shared.ports.apikeys import ApiKeyRepository
from shared.ports.clock import Clock, Draws, IdSource
from shared.ports.counters import CounterRepository, EffectLedger
from shared.ports.host import HostStore, IdempotencyStore
from shared.ports.limits import QuotaRepository, ScopeClaimRepository
from shared.ports.linked import LinkedItemStore
from shared.ports.models import (
    ChatCompletion,
    ModelMessage,
    ModelProvider,
    ModelProviderError,
    ModelProviders,
    ModelReply,
    ModelRequest,
    ModelToolCall,
    ModelToolSpec,
)
from shared.ports.orchestration import EffectDeniedError, EffectGuard, Orchestrator
from shared.ports.queues import Queue, QueueMessage, RateDecision, RateLimit, RateLimiter
from shared.ports.registrations import CredentialRepository, McpServerRepository, ToolRepository, WorkflowRepository
from shared.ports.runs import (
    AUX_PER_TRANSACTION,
    EVENTS_PER_PAGE,
    TASK_STAMP,
    WRITABLE,
    EventStore,
    ListPage,
    RunRecord,
    RunStore,
    StagedWrite,
    ToolCallRecord,
    ToolCallStore,
)
from shared.ports.sampling import SamplingRuleRepository, SuiteDraftRepository
from shared.ports.slots import Release, RunSlots, Take, Waiting
from shared.ports.starts import PendingStart, StartOutbox
from shared.ports.suites import SuiteRepository
from shared.ports.tracing import AttrValue, NoTracing, Span, Tracing
from shared.ports.transports import (
    EgressRefusedError,
    HttpReply,
    HttpTransport,
    McpDiscovery,
    McpExchange,
    McpOp,
    McpTransport,
    TransportError,
)
from shared.ports.vault import (
    BlobStore,
    Cipher,
    SecretNotFoundError,
    SecretStore,
    StackLookupError,
    StackOutputs,
)
from shared.ports.webhooks import WebhookRepository, WebhookSecretRepository

__all__ = [
    "AUX_PER_TRANSACTION",
    "EVENTS_PER_PAGE",
    "TASK_STAMP",
    "WRITABLE",
    "AgentRepository",
    "ApiKeyRepository",
    "AttrValue",
    "BlobStore",
    "ChatCompletion",
    "Cipher",
    "DeploymentRepository",
    "Clock",
    "CounterRepository",
    "CredentialRepository",
    "Draws",
    "EffectDeniedError",
    "EffectGuard",
    "EffectLedger",
    "LinkedItemStore",
    "EgressRefusedError",
    "EventStore",
    "HostStore",
    "HttpReply",
    "HttpTransport",
    "IdSource",
    "IdempotencyStore",
    "ListPage",
    "McpDiscovery",
    "McpExchange",
    "McpOp",
    "McpServerRepository",
    "McpTransport",
    "ModelMessage",
    "ModelProvider",
    "ModelProviderError",
    "ModelProviders",
    "ModelReply",
    "ModelRequest",
    "ModelToolCall",
    "ModelToolSpec",
    "NoTracing",
    "Orchestrator",
    "PendingStart",
    "Ports",
    "Queue",
    "QuotaRepository",
    "QueueMessage",
    "RateDecision",
    "RateLimit",
    "RateLimiter",
    "Release",
    "RunRecord",
    "RunSlots",
    "StagedWrite",
    "RunStore",
    "SamplingRuleRepository",
    "ScopeClaimRepository",
    "SecretNotFoundError",
    "SecretStore",
    "Span",
    "StartOutbox",
    "StackLookupError",
    "StackOutputs",
    "SuiteDraftRepository",
    "SuiteRepository",
    "Take",
    "ToolCallRecord",
    "ToolCallStore",
    "ToolRepository",
    "Tracing",
    "TransportError",
    "Waiting",
    "WebhookRepository",
    "WebhookSecretRepository",
    "WorkflowRepository",
]


@dataclass
class Ports:
    runs: RunStore
    events: EventStore
    tool_calls: ToolCallStore
    host: HostStore
    blobs: BlobStore
    idempotency: IdempotencyStore
    orchestrator: Orchestrator
    clock: Clock
    ids: IdSource
    http: HttpTransport
    mcp: McpTransport
    secrets: SecretStore
    cipher: Cipher
    signing: HostStore  # webhook signing secrets (sealed by ``cipher``): a table only registration and delivery read
    settings: Any
    models: ModelProviders
    rate_limits: RateLimiter
    # What tenants register, by aggregate (the key layout is the storage's).
    tools: ToolRepository
    mcp_servers: McpServerRepository
    credentials: CredentialRepository
    workflows: WorkflowRepository
    api_keys: ApiKeyRepository
    agents: AgentRepository
    deployments: DeploymentRepository
    webhooks: WebhookRepository
    webhook_secrets: WebhookSecretRepository
    quotas: QuotaRepository
    scope_claims: ScopeClaimRepository
    counters: CounterRepository
    ledger: EffectLedger
    linked: LinkedItemStore  # host items linked to a run, deleted by their stored reference
    sampling_rules: SamplingRuleRepository
    suite_drafts: SuiteDraftRepository
    suites: SuiteRepository
    starts: StartOutbox  # runs written but not yet started (the start outbox; decision 0150)
    slots: RunSlots  # each tenant's runs in flight and the runs waiting for a slot (fair compute; decision 0160)
    queues: dict[str, Queue] = field(default_factory=dict)
    tracing: Tracing = field(default_factory=NoTracing)
