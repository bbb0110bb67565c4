"""build_ports(settings): the only module that builds AWS clients and picks implementations."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from shared import manifest
from shared.clock import SystemClock, SystemIds
from shared.ports import (
    ChatCompletion,
    Clock,
    HttpTransport,
    McpDiscovery,
    McpExchange,
    McpOp,
    ModelProvider,
    ModelProviderError,
    ModelReply,
    ModelRequest,
    Ports,
    StackOutputs,
    Tracing,
)
from shared.settings import Settings, get_settings

_override: Ports | None = None
_built: Counter[str] = Counter()  # AWS clients this process has built, by service (see ``clients_built``)
_build_lock = threading.Lock()  # one build per settings even when threads race (local mode's background workers)
# One boto3 session per region and credential environment: its loaders read the endpoint, retry and default-config
# data once, not once per client (a function's second client was as costly to build as its first). A session keeps
# the credentials it resolved, so a process whose environment names others (the operator CLI's ``--stack``, local
# mode's restarted endpoint) gets a new one. A session is not thread-safe: its clients are built one at a time.
_SESSION_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_ENDPOINT_URL",
)
_sessions: dict[tuple[str | None, ...], Any] = {}
_session_lock = threading.Lock()


def _client(
    service: str, region: str | None = None, *, read_timeout: int = 30, max_attempts: int = 5, validate: bool = True
) -> Any:
    import boto3  # lazy: keeps handler import paths lean
    from botocore.config import Config

    from shared.services.common import PARALLEL_WORKERS

    # a connection per thread of ``common.parallel`` (opened only when used); ``validate``: botocore's own check of
    # each request's parameters (the service checks them again)
    cfg = Config(
        retries={"max_attempts": max_attempts, "mode": "standard"},
        connect_timeout=5,
        read_timeout=read_timeout,
        max_pool_connections=PARALLEL_WORKERS,
        parameter_validation=validate,
    )
    key = (region, *(os.environ.get(name) for name in _SESSION_ENV))
    with _session_lock:
        session = _sessions.get(key)
        if session is None:
            session = _sessions[key] = boto3.session.Session(region_name=region)
        client = session.client(service, config=cfg)
    _built[service] += 1
    return client


def clients_built() -> dict[str, int]:
    """The AWS clients built by this module since the process started (or since ``reset_ports``), by service:
    what a cold request actually paid for. Tests assert on it; nothing else reads it."""
    return dict(_built)


class LazyClient:
    """A boto3 client built on first use, once per process (thread-safe): what each port implementation receives.

    It stands for the client itself (attribute access is forwarded), so the ports' implementations and their
    interfaces do not change; a function whose request never touches S3 or Step Functions never pays for building
    those clients (~70 ms each on a cold Lambda)."""

    __slots__ = ("_client", "_factory", "_lock", "service")

    def __init__(self, service: str, factory: Callable[[], Any]) -> None:
        self.service = service
        self._factory = factory
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        return self._client is not None

    def get(self) -> Any:
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._factory()
                client = self._client
        return client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)

    def __repr__(self) -> str:
        return f"LazyClient({self.service!r}, built={self.built})"


def build_stack_outputs(region: str | None) -> StackOutputs:
    """The StackOutputs port (CloudFormation) for the operator CLI's ``--stack NAME --region R``."""
    from shared.deployment.cloudformation import CloudFormationStackOutputs

    return CloudFormationStackOutputs(lambda: _client("cloudformation", region), region)


class _LazyMcp:
    """The MCP client, built on first use (the ``mcp`` SDK is heavy; most functions never call a server)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._impl: Any = None

    def _get(self) -> Any:
        if self._impl is None:
            from shared.transports.mcp import McpSdkTransport

            self._impl = McpSdkTransport(_egress(self._settings))
        return self._impl

    def discover(self, url: str, headers: dict[str, str], *, revision: str, timeout_s: float) -> McpDiscovery:
        out: McpDiscovery = self._get().discover(url, headers, revision=revision, timeout_s=timeout_s)
        return out

    def exchange(self, url: str, headers: dict[str, str], op: McpOp, *, revision: str, timeout_s: float) -> McpExchange:
        out: McpExchange = self._get().exchange(url, headers, op, revision=revision, timeout_s=timeout_s)
        return out

    def list_tools(
        self, url: str, headers: dict[str, str], *, discovered: McpDiscovery, timeout_s: float
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = self._get().list_tools(url, headers, discovered=discovered, timeout_s=timeout_s)
        return out

    def call_tool(
        self,
        url: str,
        headers: dict[str, str],
        name: str,
        arguments: dict[str, Any],
        *,
        meta: dict[str, Any],
        discovered: McpDiscovery,
        timeout_s: float,
    ) -> dict[str, Any]:
        out: dict[str, Any] = self._get().call_tool(
            url, headers, name, arguments, meta=meta, discovered=discovered, timeout_s=timeout_s
        )
        return out


def _egress(settings: Settings) -> Any:
    from shared.transports.egress import EgressPolicy

    return EgressPolicy.from_entries(settings.egress_allow)


MODEL_PROVIDERS = ("bedrock", "openai", "mock")
# A model answer can take minutes; botocore's own retries stay few (the turn loop owns retrying a model call).
BEDROCK_READ_TIMEOUT_S = 300
BEDROCK_MAX_ATTEMPTS = 2


class ModelRouter:
    """The ``ModelProviders`` port: the enabled providers by canonical id, each adapter built on its first call.

    ``complete`` dispatches on ``request.provider``: a provider this host does not run is ``validation_error``;
    ``mock`` where mocks are not served (not enabled, or the ``prod`` stage) is ``mock_provider_forbidden``."""

    def __init__(
        self, enabled: Sequence[str], factories: Mapping[str, Callable[[], ModelProvider]], *, mock_allowed: bool
    ) -> None:
        unknown = sorted(set(enabled) - set(factories))
        if unknown:
            raise ValueError(
                f"MODEL_PROVIDERS names unknown provider(s) {', '.join(unknown)} (known: {', '.join(factories)})"
            )
        self._enabled = tuple(dict.fromkeys(p for p in enabled if p != "mock" or mock_allowed))
        self._factories = dict(factories)
        self._built: dict[str, ModelProvider] = {}

    def names(self) -> tuple[str, ...]:
        return self._enabled

    def mock_ids(self) -> tuple[str, ...]:
        from shared.providers.mock import MOCK_PROVIDER_IDS

        return MOCK_PROVIDER_IDS if "mock" in self._enabled else ()

    def check_mock(self, config: Any) -> None:
        from shared.providers.mock import validate_mock_config

        validate_mock_config(config)

    def complete(self, request: ModelRequest) -> ModelReply:
        return self._provider(request.provider).complete(request)

    def complete_chat(
        self, body: dict[str, Any], *, base_url: str | None, credential: str | None, timeout_s: float = 60.0
    ) -> ChatCompletion:
        passthrough = getattr(self._provider("openai"), "complete_chat", None)
        if passthrough is None:
            raise ModelProviderError("validation_error", "the openai provider here does not pass chat bodies through")
        out: ChatCompletion = passthrough(body, base_url=base_url, credential=credential, timeout_s=timeout_s)
        return out

    def _provider(self, name: str) -> ModelProvider:
        if name not in self._enabled:
            if name == "mock":
                raise ModelProviderError("mock_provider_forbidden", "this deployment does not serve mock providers")
            raise ModelProviderError(
                "validation_error",
                f"the model provider is not one this host runs (supported: {', '.join(self._enabled)})",
            )
        impl = self._built.get(name)
        if impl is None:
            impl = self._built[name] = self._factories[name]()
        return impl


def build_models(settings: Settings, http: HttpTransport) -> ModelRouter:
    """The model providers: Bedrock through ``bedrock-runtime`` (the function role's credentials), the
    OpenAI-compatible wire through the egress-guarded ``http`` transport, and the mock (never in ``prod``)."""

    def prices() -> Any:
        from shared.providers.prices import PriceTable

        return PriceTable.from_setting(settings.model_prices)

    def bedrock() -> ModelProvider:
        from shared.providers.bedrock import BedrockConverseProvider

        return BedrockConverseProvider(
            lambda: _client("bedrock-runtime", read_timeout=BEDROCK_READ_TIMEOUT_S, max_attempts=BEDROCK_MAX_ATTEMPTS),
            prices(),
        )

    def openai() -> ModelProvider:
        from shared.providers.openai import OpenAiChatProvider

        return OpenAiChatProvider(http, prices())

    def mock() -> ModelProvider:
        from shared.providers.mock import MockProvider

        return MockProvider(prices())

    return ModelRouter(
        settings.model_providers,
        {"bedrock": bedrock, "openai": openai, "mock": mock},
        mock_allowed=settings.stage != "prod",
    )


def build_tracing(settings: Settings) -> Tracing:
    """Spans over OTLP/HTTP when ``settings.tracing_endpoint`` is set (OpenTelemetry imported only then), else none."""
    if not settings.tracing_endpoint:
        from shared.ports import NoTracing

        return NoTracing()
    from shared.telemetry.otel import OtelTracing

    return OtelTracing.otlp(
        settings.tracing_endpoint, service_name=settings.host_name, capture_content=settings.tracing_capture_content
    )


def build_ports(settings: Settings) -> Ports:
    from shared.orchestration.step_functions import StepFunctionsOrchestrator
    from shared.storage.agents import DynamoAgentRepository, DynamoDeploymentRepository
    from shared.storage.apikeys import DynamoApiKeyRepository
    from shared.storage.blobs import S3BlobStore
    from shared.storage.counters import DynamoCounterRepository, DynamoEffectLedger
    from shared.storage.ddb import Tombstones
    from shared.storage.events import DynamoEventStore
    from shared.storage.host import DynamoHostStore
    from shared.storage.idempotency import DynamoIdempotencyStore
    from shared.storage.kms import KmsCipher
    from shared.storage.limits import DynamoQuotaRepository, DynamoScopeClaimRepository
    from shared.storage.linked import DynamoLinkedItemStore
    from shared.storage.ratelimit import DynamoRateLimiter
    from shared.storage.registrations import DynamoCredentialRepository, DynamoMcpServerRepository, DynamoToolRepository
    from shared.storage.runs import DynamoRunStore
    from shared.storage.sampling import DynamoSamplingRuleRepository, DynamoSuiteDraftRepository
    from shared.storage.secrets import SecretsManagerSecretStore
    from shared.storage.slots import DynamoRunSlots
    from shared.storage.sqs import SqsQueue
    from shared.storage.starts import DynamoStartOutbox
    from shared.storage.suites import DynamoSuiteRepository
    from shared.storage.tool_calls import DynamoToolCallStore
    from shared.storage.webhooks import DynamoWebhookRepository, DynamoWebhookSecretRepository
    from shared.storage.workflows import DynamoWorkflowRepository
    from shared.transports.http import GuardedHttpTransport

    # Our stores build every DynamoDB request, and DynamoDB validates it: botocore's check of each one was a fifth of
    # the client's CPU in a batched read of 10,000 runs (docs/decisions/0121-from-runs-at-ten-thousand.md).
    ddb = LazyClient("dynamodb", lambda: _client("dynamodb", validate=False))
    clock = SystemClock()
    blobs = S3BlobStore(LazyClient("s3", lambda: _client("s3")), settings.fixtures_bucket)
    http = GuardedHttpTransport(_egress(settings))
    secrets = SecretsManagerSecretStore(LazyClient("secretsmanager", lambda: _client("secretsmanager")).get)
    tombstones = Tombstones(lambda: secrets.get_secret(settings.tombstone_secret_id))
    host = DynamoHostStore(ddb, settings.host_table, settings.runs_table)
    signing = DynamoHostStore(ddb, settings.signing_table, settings.runs_table)
    events = DynamoEventStore(ddb, settings.events_table, settings.runs_table, blobs)
    return Ports(
        runs=DynamoRunStore(ddb, settings.runs_table, clock, blobs, tombstones, events.tail_after),
        events=events,
        tool_calls=DynamoToolCallStore(
            ddb, settings.tool_calls_table, settings.runs_table, blobs, settings.host_table, tombstones
        ),
        host=host,
        blobs=blobs,
        idempotency=DynamoIdempotencyStore(ddb, settings.idempotency_table),
        orchestrator=StepFunctionsOrchestrator(
            LazyClient("stepfunctions", lambda: _client("stepfunctions")),
            dict(settings.state_machine_arns),
        ),
        clock=clock,
        ids=SystemIds(clock),
        http=http,
        mcp=_LazyMcp(settings),
        secrets=secrets,
        cipher=KmsCipher(LazyClient("kms", lambda: _client("kms")), {manifest.SIGNING: settings.signing_key_id}),
        signing=signing,
        settings=settings,
        models=build_models(settings, http),
        rate_limits=DynamoRateLimiter(ddb, settings.host_table, clock.now_ms),
        tools=DynamoToolRepository(host),
        mcp_servers=DynamoMcpServerRepository(host),
        credentials=DynamoCredentialRepository(host, settings.credentials_prefix),
        workflows=DynamoWorkflowRepository(host),
        api_keys=DynamoApiKeyRepository(host),
        agents=DynamoAgentRepository(host),
        deployments=DynamoDeploymentRepository(host),
        webhooks=DynamoWebhookRepository(host),
        webhook_secrets=DynamoWebhookSecretRepository(signing),
        quotas=DynamoQuotaRepository(host),
        scope_claims=DynamoScopeClaimRepository(host),
        counters=DynamoCounterRepository(host),
        ledger=DynamoEffectLedger(host),
        linked=DynamoLinkedItemStore(host),
        sampling_rules=DynamoSamplingRuleRepository(host),
        suite_drafts=DynamoSuiteDraftRepository(host),
        suites=DynamoSuiteRepository(host),
        starts=DynamoStartOutbox(host),
        slots=DynamoRunSlots(ddb, settings.host_table),
        queues={"webhooks": SqsQueue(LazyClient("sqs", lambda: _client("sqs")).get, settings.webhook_queue_url)},
        tracing=build_tracing(settings),
    )


def build_dynamodb_client(ports: Ports) -> None:
    """Build now the DynamoDB client of ``ports`` (its service model and endpoint rules loaded): a function's init
    does, so that its first request does not (docs/decisions/0167). The client is the one every DynamoDB store of
    ``build_ports`` shares (the run store's); nothing for ports this module did not build."""
    client = getattr(ports.runs, "_c", None)
    if isinstance(client, LazyClient):
        client.get()


@lru_cache(maxsize=2)
def _cached(settings: Settings) -> Ports:
    return build_ports(settings)


@dataclass(frozen=True)
class Discovery:
    """The ports the discovery document reads (``services.discovery.Discoverable``): no store, so no AWS SDK."""

    settings: Settings
    clock: Clock
    models: ModelRouter


@lru_cache(maxsize=2)
def _discovery(settings: Settings) -> Discovery:
    from shared.transports.http import GuardedHttpTransport

    return Discovery(settings, SystemClock(), build_models(settings, GuardedHttpTransport(_egress(settings))))


def get_discovery() -> Ports | Discovery:
    """What a public function answers the discovery document from: the ports a test set, else a view of the
    settings, clock and model providers alone, built once, with no AWS client imported: the document is every
    client's first request, and a cold start for it need not load an SDK."""
    if _override is not None:
        return _override
    with _build_lock:
        return _discovery(get_settings())


def get_ports() -> Ports:
    """Ports for this process, built once per cold start (per settings). Tests may call ``set_ports``."""
    if _override is not None:
        return _override
    with _build_lock:
        return _cached(get_settings())


def flush_spans() -> None:
    """Export the spans this process has ended (the end of a Lambda invocation); nothing when no ports were built."""
    ports = _override
    if ports is None and _cached.cache_info().currsize:
        ports = _cached(get_settings())
    if ports is not None:
        ports.tracing.flush()


def set_ports(ports: Ports | None) -> None:
    global _override
    _override = ports


def reset_ports() -> None:
    global _override
    _override = None
    _cached.cache_clear()
    _discovery.cache_clear()
    _built.clear()
    with _session_lock:
        _sessions.clear()
