"""The one resource manifest and route table.

Both the CDK stack (``infra/``) and the local bootstrap (``shared/local``) read
this module, so deployed and local routing, tables, functions and state
machines cannot drift. Plain data only: no AWS calls, no imports beyond the
standard library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

KeyType = Literal["S", "N"]

# The Lambda runtime of every function (infra/runtimes.py holds AWS's support dates; the layer is built for it).
RUNTIME = "python3.13"
Access = Literal["read", "write", "readwrite", "write+replay"]
# The KMS encryption context of a value sealed only to be answered again (an idempotent replay): a role granted
# "write+replay" decrypts only values sealed with it.
REPLAY_CONTEXT = ("purpose", "idempotent-replay")


@dataclass(frozen=True)
class Index:
    name: str
    partition_key: tuple[str, KeyType]
    sort_key: tuple[str, KeyType]


@dataclass(frozen=True)
class Table:
    """A DynamoDB table. ``key`` is the logical name; the env var is ``<KEY>_TABLE``."""

    key: str
    partition_key: tuple[str, KeyType]
    sort_key: tuple[str, KeyType] | None
    ttl_attribute: str = "expiresAt"
    stream: bool = False
    indexes: tuple[Index, ...] = ()
    purpose: str = ""
    # in the DynamoDbThrottles alarm (a math alarm takes at most 10 metrics: two per table, five tables)
    throttle_alarm: bool = True

    @property
    def env_var(self) -> str:
        return f"{self.key.upper()}_TABLE"

    @property
    def local_name(self) -> str:
        return f"openwop-{self.key}"


@dataclass(frozen=True)
class Bucket:
    key: str
    purpose: str = ""

    @property
    def env_var(self) -> str:
        return f"{self.key.upper()}_BUCKET"

    @property
    def local_name(self) -> str:
        return f"openwop-{self.key}"


@dataclass(frozen=True)
class Secret:
    """A Secrets Manager secret with a generated value. Functions get its ARN (locally its name) in ``env_var``."""

    key: str
    purpose: str = ""
    json_key: str = ""  # when set, the generated value is stored as the JSON object {json_key: value}

    @property
    def env_var(self) -> str:
        return f"{self.key.upper()}_SECRET_ID"

    @property
    def local_name(self) -> str:
        return f"openwop-{self.key}"


@dataclass(frozen=True)
class Key:
    """A KMS key (symmetric, rotated yearly) for values encrypted in the application before they are stored.
    Functions get its ARN (locally its alias) in ``env_var``; ``Function.keys`` grants Encrypt (write), Decrypt
    (read) or both."""

    key: str
    purpose: str = ""

    @property
    def env_var(self) -> str:
        return f"{self.key.upper()}_KEY_ID"

    @property
    def local_name(self) -> str:
        return f"alias/openwop-{self.key}"


@dataclass(frozen=True)
class Function:
    """One Lambda function. ``module`` exposes ``lambda_handler``."""

    name: str
    module: str
    kind: Literal["api", "task", "stream", "setup", "queue"]  # setup: a CloudFormation custom resource
    tables: tuple[tuple[str, Access], ...] = ()
    bucket: Access | None = None
    starts: tuple[str, ...] = ()  # state machines it may start / stop
    secrets: tuple[str, ...] = ()  # secrets it may read
    credentials: Access | None = None  # tenants' tool credentials (Secrets Manager, under the credentials prefix)
    egress: bool = False  # calls tools / MCP servers outside AWS (egress settings apply)
    resumes: tuple[str, ...] = ()  # state machines whose waiting (task token) tasks it may resume
    models: bool = False  # calls model providers (Bedrock with its role; others through egress and credentials)
    sends: tuple[str, ...] = ()  # queues it may send to
    consumes: str | None = None  # the queue whose messages it is invoked with (event source mapping)
    keys: tuple[tuple[str, Access], ...] = ()  # KMS keys it may use: read = Decrypt, write = Encrypt,
    # write+replay = Encrypt, and Decrypt only of what was sealed for an idempotent replay (REPLAY_CONTEXT)
    timeout_s: int = 30
    memory_mb: int = 512

    @property
    def local_name(self) -> str:
        return f"openwop-{self.name.replace('_', '-')}"


@dataclass(frozen=True)
class Queue:
    """An SQS FIFO queue with its dead-letter queue. Functions get its URL in ``env_var``.

    ``visibility_s`` is the first retry's delay; ``max_receives`` the attempts before SQS moves a message to the
    dead-letter queue (the redrive policy's maxReceiveCount)."""

    key: str
    purpose: str = ""
    visibility_s: int = 30
    max_receives: int = 8
    retention_days: int = 4

    @property
    def env_var(self) -> str:
        return f"{self.key.upper()}_QUEUE_URL"

    @property
    def local_name(self) -> str:
        return f"openwop-{self.key}.fifo"

    @property
    def dlq_local_name(self) -> str:
        return f"openwop-{self.key}-dlq.fifo"


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


@dataclass(frozen=True)
class StateMachine:
    """A Step Functions state machine defined by an ASL file with ``${Name}`` placeholders.

    ``substitutions`` maps a placeholder to ``function:<name>`` (the function's ``live`` alias on AWS, the function
    locally), ``table:<key>`` (the table name), ``bucket:<key>`` (the bucket name) or ``setting:<name>`` (an
    operator setting of ``ASL_SETTINGS``: CDK context on AWS, the environment locally).
    """

    key: str
    file: str
    substitutions: dict[str, str] = field(default_factory=dict)
    invokes: tuple[str, ...] = ()

    @property
    def env_var(self) -> str:
        return f"{self.key.upper()}_STATE_MACHINE_ARN"

    @property
    def local_name(self) -> str:
        return f"openwop-{self.key}"


RUNS = "runs"
EVENTS = "events"
TOOL_CALLS = "toolcalls"
IDEMPOTENCY = "idempotency"
HOST = "host"
SIGNING = "signing"

TABLES: tuple[Table, ...] = (
    Table(
        RUNS,
        ("pk", "S"),
        ("sk", "S"),
        stream=True,
        indexes=(
            Index("byTenant", ("gsi1pk", "S"), ("gsi1sk", "S")),
            Index("byTenantEval", ("gsi2pk", "S"), ("gsi2sk", "S")),
        ),
        purpose="run items (sk RUN), fork source outcomes, eval trial results, tombstones",
    ),
    Table(
        EVENTS,
        ("runId", "S"),
        ("seq", "N"),
        stream=True,
        purpose="the run event logs (the stream's INSERT records feed the webhook fan-out)",
    ),
    Table(TOOL_CALLS, ("runId", "S"), ("callKey", "S"), purpose="as-executed tool calls"),
    Table(
        IDEMPOTENCY,
        ("id", "S"),
        None,
        ttl_attribute="expiration",
        purpose="Powertools idempotency records",
    ),
    Table(HOST, ("pk", "S"), ("sk", "S"), purpose="API key hashes, eval suites, counters, effect ledger"),
    # A table of its own, so only the roles granted it (webhook registration and delivery) can read it at all; its
    # values are encrypted with the signing key besides (shared/services/webhook_secrets.py).
    # (Not in the throttle alarm: read once per delivery, a throttled read fails the delivery, which the queue retries
    # and the WebhooksDeadLetters alarm reports.)
    Table(
        SIGNING,
        ("pk", "S"),
        ("sk", "S"),
        purpose="webhook signing secrets, encrypted with the signing key",
        throttle_alarm=False,
    ),
)

FIXTURES = "fixtures"
BUCKETS: tuple[Bucket, ...] = (Bucket(FIXTURES, purpose="derived fixture copies and large payloads"),)

CURSOR = "cursor"
APIKEY_PEPPER = "pepper"
TOMBSTONE = "tombstone"
SECRETS: tuple[Secret, ...] = (
    Secret(CURSOR, purpose="HMAC key of the list cursors (GET /runs, GET /webhooks)"),
    Secret(
        APIKEY_PEPPER,
        purpose="HMAC key (pepper) of the stored API key hashes; current and previous",
        json_key="current",
    ),
    Secret(
        TOMBSTONE, purpose="HMAC key of erasure tombstones' keys (a tombstone never holds the run id); never rotated"
    ),
)

KEYS: tuple[Key, ...] = (Key(SIGNING, purpose="encrypts webhook signing secrets (registration and delivery only)"),)

WEBHOOKS = "webhooks"
QUEUES: tuple[Queue, ...] = (
    Queue(
        WEBHOOKS,
        purpose="webhook deliveries, one message per (subscription, event); FIFO, grouped per (subscription, run)",
    ),
)

_RW_ALL: tuple[tuple[str, Access], ...] = (
    (RUNS, "readwrite"),
    (EVENTS, "readwrite"),
    (TOOL_CALLS, "readwrite"),
    (HOST, "readwrite"),
)
_READ: tuple[tuple[str, Access], ...] = ((RUNS, "read"), (EVENTS, "read"), (HOST, "read"))

FUNCTIONS: tuple[Function, ...] = (
    Function("get_capabilities", "functions.get_capabilities.handler", "api", ((HOST, "read"),)),
    Function("get_openapi", "functions.get_openapi.handler", "api"),
    Function(
        "create_run",
        "functions.create_run.handler",
        "api",
        _RW_ALL + ((IDEMPOTENCY, "readwrite"),),
        bucket="readwrite",
        starts=("run", "eval"),
    ),
    Function("list_runs", "functions.list_runs.handler", "api", _READ, secrets=(CURSOR,)),
    Function("get_run", "functions.get_run.handler", "api", _READ),
    Function(
        "run_actions",
        "functions.run_actions.handler",
        "api",
        _RW_ALL + ((IDEMPOTENCY, "readwrite"),),
        bucket="readwrite",
        starts=("fork",),
        resumes=("run", "fork"),
    ),
    Function(
        "delete_run", "functions.delete_run.handler", "api", _RW_ALL, bucket="readwrite", starts=("run", "eval", "fork")
    ),
    Function(
        "cancel_run",
        "functions.cancel_run.handler",
        "api",
        _RW_ALL + ((IDEMPOTENCY, "readwrite"),),
        starts=("run", "eval", "fork"),
    ),
    Function("stream_run_events", "functions.stream_run_events.handler", "api", _READ, bucket="read"),
    Function("poll_run_events", "functions.poll_run_events.handler", "api", _READ, bucket="read"),
    Function("get_eval_summary", "functions.get_eval_summary.handler", "api", _READ),
    Function(
        "get_eval_report",
        "functions.get_eval_report.handler",
        "api",
        ((RUNS, "read"), (EVENTS, "read"), (TOOL_CALLS, "read"), (HOST, "read")),
        bucket="read",
    ),
    Function("get_ui", "functions.get_ui.handler", "api", memory_mb=128),
    Function("get_workflow", "functions.get_workflow.handler", "api", ((HOST, "read"),)),
    Function("get_effect_seams", "functions.get_effect_seams.handler", "api", ((HOST, "read"),)),
    # Registration checks a task's source run (its record, its log) and links the run to the version: up to 10,000
    # sources in one request, read and checked inside API Gateway's 30 s on one full vCPU, 1,769 MB (decision 0121).
    Function("put_eval_suite", "functions.put_eval_suite.handler", "api", _RW_ALL, bucket="read", memory_mb=1769),
    Function(
        "manage_eval_suites", "functions.manage_eval_suites.handler", "api", _RW_ALL, bucket="read", memory_mb=1769
    ),
    Function(
        "advance_run",
        "functions.tasks.advance_run.handler",
        "task",
        _RW_ALL,
        bucket="readwrite",
        timeout_s=300,
        credentials="read",
        egress=True,
        models=True,
    ),
    Function(
        "run_eval_trial",
        "functions.tasks.run_eval_trial.handler",
        "task",
        _RW_ALL,
        bucket="readwrite",
        timeout_s=300,
        credentials="read",
        egress=True,
        models=True,
    ),
    Function("finish_eval", "functions.tasks.finish_eval.handler", "task", _RW_ALL, bucket="readwrite", timeout_s=300),
    Function("fail_run", "functions.tasks.fail_run.handler", "task", _RW_ALL, bucket="readwrite"),
    Function("not_found", "functions.not_found.handler", "api", memory_mb=128),
    Function(
        "erase_run",
        "functions.erase_run.handler",
        "stream",
        _RW_ALL + ((IDEMPOTENCY, "readwrite"),),
        bucket="readwrite",
        timeout_s=300,
        starts=("run", "eval", "fork"),
    ),
    Function("get_tools", "functions.get_tools.handler", "api", ((HOST, "read"),)),
    # Registering an MCP server negotiates with it: the outcome's audit run (runs, events).
    Function(
        "manage_tools",
        "functions.manage_tools.handler",
        "api",
        ((HOST, "readwrite"), (RUNS, "readwrite"), (EVENTS, "readwrite")),
        credentials="read",
        egress=True,
    ),
    Function(
        "manage_credentials",
        "functions.manage_credentials.handler",
        "api",
        ((HOST, "readwrite"),),
        credentials="readwrite",
    ),
    Function("manage_agents", "functions.manage_agents.handler", "api", ((HOST, "readwrite"),)),
    Function("register_workflow", "functions.register_workflow.handler", "api", ((HOST, "readwrite"),)),
    Function("list_workflows", "functions.list_workflows.handler", "api", ((HOST, "read"),)),
    Function("delete_workflow", "functions.delete_workflow.handler", "api", ((HOST, "readwrite"),)),
    # The conformance seams (certification stage only): seed an era-2 log (runs, events), fire an effect seam (a run).
    # The MCP invoke seam calls the caller's MCP server (egress) and writes an audit run.
    Function(
        "conformance_seams",
        "functions.conformance_seams.handler",
        "api",
        _RW_ALL,
        bucket="readwrite",
        starts=("run",),
        egress=True,
    ),
    Function("park_run", "functions.tasks.park_run.handler", "task", ((RUNS, "readwrite"),), memory_mb=256),
    Function(
        "interrupts",
        "functions.interrupts.handler",
        "api",
        _RW_ALL + ((IDEMPOTENCY, "readwrite"),),
        secrets=(CURSOR,),
        resumes=("run", "fork"),
    ),
    # Deploy-time seeding (CDK context ``seed``): the conformance fixtures and the demo; dials the demo MCP server
    # (registering it negotiates: the outcome's audit run, runs and events).
    Function(
        "seed_host",
        "functions.seed_host.handler",
        "setup",
        ((HOST, "readwrite"), (RUNS, "readwrite"), (EVENTS, "readwrite")),
        egress=True,
        timeout_s=120,
        memory_mb=256,
    ),
    # Signing secrets: registration encrypts them (it decrypts only an idempotent answer it sealed), delivery decrypts
    # them (and encrypts a subscription's cleartext secret of before the signing table once, when it first delivers).
    Function(
        "manage_webhooks",
        "functions.manage_webhooks.handler",
        "api",
        ((HOST, "readwrite"), (IDEMPOTENCY, "readwrite"), (SIGNING, "readwrite")),
        secrets=(CURSOR,),
        egress=True,
        keys=((SIGNING, "write+replay"),),
    ),
    # The events stream's consumer: webhook fan-out, and the sampling rules (a completed run's task into a draft).
    Function(
        "fanout_webhooks",
        "functions.fanout_webhooks.handler",
        "stream",
        ((RUNS, "readwrite"), (EVENTS, "read"), (HOST, "readwrite"), (TOOL_CALLS, "read")),
        bucket="read",
        sends=(WEBHOOKS,),
        memory_mb=256,
        timeout_s=60,
    ),
    # The runs table: a delivery reads its run's item (an erased run's message is dropped), and a dead letter is
    # linked under its run (its erasure deletes it).
    Function(
        "deliver_webhooks",
        "functions.tasks.deliver_webhooks.handler",
        "queue",
        ((HOST, "readwrite"), (EVENTS, "read"), (SIGNING, "readwrite"), (RUNS, "readwrite")),
        bucket="read",  # events too large to travel in the message
        consumes=WEBHOOKS,
        egress=True,
        memory_mb=256,
        timeout_s=60,
        keys=((SIGNING, "readwrite"),),
    ),
)

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


@dataclass(frozen=True)
class Cors:
    """The HTTP API's CORS configuration (API Gateway's ``CorsConfiguration``; the local front does the same).

    Preflights (``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``) are answered by API Gateway
    itself, before any route; an actual request from a granted origin gets ``Access-Control-Allow-Origin`` and
    ``Access-Control-Expose-Headers`` added to its answer. headers.md §Cross-origin preflight: a granted origin must
    be admitted the operation's method and every request header the contract declares for it (``Authorization``
    listed by name: a ``*`` does not admit it); admitting the union on every operation conforms. No credentials
    mode: callers authenticate with a bearer key their script sets, never with a cookie."""

    allow_methods: tuple[str, ...] = ("GET", "POST", "PUT", "DELETE")
    allow_headers: tuple[str, ...] = (
        "Accept-Language",
        "Authorization",
        "Content-Type",
        "Idempotency-Key",
        "If-None-Match",
        "Last-Event-ID",
        "OpenWOP-Client-Version",
        "OpenWOP-Dedup",
        "OpenWOP-Force-Engine-Version",
        "OpenWOP-Version",
    )
    expose_headers: tuple[str, ...] = (
        "Allow",
        "ETag",
        "OpenWOP-Idempotent-Replay",
        "OpenWOP-Version",
        "Retry-After",
        "WWW-Authenticate",
    )
    max_age_s: int = 600


CORS = Cors()
CORS_ANY_ORIGIN = "*"


def cors_origins(raw: str | None) -> tuple[str, ...]:
    """The origins granted, from a setting (``OPENWOP_CORS_ORIGINS`` locally, CDK context ``corsOrigins``):
    unset is every origin (``*``: bearer keys only, no cookies, so no ambient credential crosses origins), a comma
    list is those origins exactly, and an empty value grants none (CORS off)."""
    if raw is None:
        return (CORS_ANY_ORIGIN,)
    return tuple(o.strip().rstrip("/") for o in raw.split(",") if o.strip())


# Operator settings the ASL files read through a placeholder: name (the CDK context key) -> (the env var the local
# stack reads, the default). ``parkedTimeout``: seconds a run may stay paused or waiting in the Park task before it
# fails ``run_timeout`` (7 days; at most the run's retention, checked at synthesis).
ASL_SETTINGS: dict[str, tuple[str, int]] = {"parkedTimeout": ("PARKED_TIMEOUT_SECONDS", 7 * 86_400)}

STATE_MACHINES: tuple[StateMachine, ...] = (
    StateMachine(
        "run",
        "statemachines/run.asl.json",
        {
            "AdvanceRunFunction": "function:advance_run",
            "FailRunFunction": "function:fail_run",
            "ParkRunFunction": "function:park_run",
            "ParkedTimeoutSeconds": "setting:parkedTimeout",
        },
        invokes=("advance_run", "fail_run", "park_run"),
    ),
    StateMachine(
        "eval",
        "statemachines/eval-run.asl.json",
        {
            "RunEvalTrialFunction": "function:run_eval_trial",
            "FinishEvalFunction": "function:finish_eval",
            "FailRunFunction": "function:fail_run",
            "FixturesBucket": f"bucket:{FIXTURES}",
        },
        invokes=("run_eval_trial", "finish_eval", "fail_run"),
    ),
    StateMachine(
        "fork",
        "statemachines/fork-replay.asl.json",
        {
            "AdvanceRunFunction": "function:advance_run",
            "FailRunFunction": "function:fail_run",
            "ParkRunFunction": "function:park_run",
            "ParkedTimeoutSeconds": "setting:parkedTimeout",
        },
        invokes=("advance_run", "fail_run", "park_run"),
    ),
)

# The DynamoDB stream of the runs table feeds the erasure hook (REMOVE records only); the events table's stream
# feeds the webhook fan-out (INSERT records only: an event is fanned out once it is durably stored).
STREAM_CONSUMERS: tuple[tuple[str, str], ...] = ((RUNS, "erase_run"), (EVENTS, "fanout_webhooks"))
STREAM_EVENT_NAMES: dict[tuple[str, str], str] = {(RUNS, "erase_run"): "REMOVE", (EVENTS, "fanout_webhooks"): "INSERT"}


def _segment_rank(pattern: str, segment: str) -> int:
    """How specifically an operation path's segment matches a raw request segment: 0 not at all, then ``{x}``
    (1), ``{x}:verb`` (2), a literal (3)."""
    if pattern.startswith("{"):
        name_end = pattern.find("}")
        suffix = pattern[name_end + 1 :]
        if not suffix:
            return 1 if segment else 0
        return 2 if segment.endswith(suffix) and len(segment) > len(suffix) else 0
    return 3 if pattern == segment else 0


def is_seam_path(path: str) -> bool:
    """A path of the certification-stage test surface (the seams profile and the durability hook): served only with
    ``OPENWOP_CONFORMANCE_SEAMS``, left out of the served OpenAPI document."""
    return path.startswith((SEAMS_PATH, DURABILITY_PATH))


def allowed_methods(raw_path: str, routes: tuple[Route, ...] | None = None) -> tuple[str, ...] | None:
    """The methods the operations at ``raw_path`` (still percent-encoded) are served with, sorted, or ``None``
    when no operation has that path (a ``404``, not a ``405``). The most specific operation path wins:
    ``/runs/x:diff`` is ``/runs/{runId}:diff`` (``GET``), not ``/runs/{runId}`` (``GET``, ``DELETE``)."""
    segments = raw_path.split("/")[1:] if raw_path.startswith("/") else raw_path.split("/")
    best: tuple[int, ...] = ()
    methods: set[str] = set()
    for method, patterns in _operation_patterns(ROUTES if routes is None else routes).get(len(segments), ()):
        rank = tuple(_segment_rank(p, s) for p, s in zip(patterns, segments, strict=True))
        if 0 in rank or rank < best:
            continue
        if rank > best:
            best, methods = rank, set()
        methods.add(method)
    return tuple(sorted(methods)) if methods else None


@lru_cache(maxsize=4)
def _operation_patterns(routes: tuple[Route, ...]) -> dict[int, list[tuple[str, tuple[str, ...]]]]:
    """(method, path segments) of every operation of ``routes``, by segment count (computed once per table)."""
    out: dict[int, list[tuple[str, tuple[str, ...]]]] = {}
    for route in routes:
        for path in route.operations:
            patterns = tuple(path.split("/")[1:])
            out.setdefault(len(patterns), []).append((route.method.upper(), patterns))
    return out


def queue(key: str) -> Queue:
    for q in QUEUES:
        if q.key == key:
            return q
    raise KeyError(key)


def function(name: str) -> Function:
    for f in FUNCTIONS:
        if f.name == name:
            return f
    raise KeyError(name)


def kms_key(key: str) -> Key:
    for k in KEYS:
        if k.key == key:
            return k
    raise KeyError(key)


def table(key: str) -> Table:
    for t in TABLES:
        if t.key == key:
            return t
    raise KeyError(key)


def secrets_of(fn: Function) -> tuple[str, ...]:
    """The secrets ``fn`` may read: its declared ones, plus the API-key pepper when it serves an authenticated
    route (it resolves callers) or the operator commands need it (none: the CLI runs with the operator's rights),
    and the tombstone key when it uses the runs table."""
    authenticates = any(r.function == fn.name and r.auth for r in ROUTES)
    runs = any(t == RUNS for t, _ in fn.tables)  # a function of the runs table may meet a tombstone: its key's key
    return (
        fn.secrets
        + ((APIKEY_PEPPER,) if authenticates and APIKEY_PEPPER not in fn.secrets else ())
        + ((TOMBSTONE,) if runs and TOMBSTONE not in fn.secrets else ())
    )
