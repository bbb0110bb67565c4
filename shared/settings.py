"""Runtime settings, read once per cold start from the environment.

Every variable the runtime reads is declared here. Names of tables, the bucket
and state machines come from the resource manifest (``shared.manifest``) so
CDK, the local bootstrap and the handlers agree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

from shared import manifest


@dataclass(frozen=True)
class Settings:
    runs_table: str
    events_table: str
    tool_calls_table: str
    idempotency_table: str
    host_table: str
    signing_table: str
    fixtures_bucket: str
    # (the manifest's machine key, its ARN: "" where this process has none), a tuple: the settings key a cache
    state_machine_arns: tuple[tuple[str, str], ...]
    retention_days: int = 30
    max_poll_wait_s: int = 25
    conformance_enabled: bool = True
    # The conformance seams profile (/conformance/seams/..., openwop-conformance-seams-v2): a certification-stage
    # setting, off unless OPENWOP_CONFORMANCE_SEAMS=true (CDK context conformanceSeams; the local host turns it on).
    conformance_seams: bool = False
    host_name: str = "openwop-serverless"
    build_id: str = "unknown"
    http_allowlist: tuple[str, ...] = ()
    run_tool_call_budget: int = 1000
    cursor_secret_id: str = ""
    tombstone_secret_id: str = ""
    egress_allow: tuple[str, ...] = ()
    tool_response_max_bytes: int = 1_000_000
    credentials_prefix: str = "openwop-serverless/credentials"
    apikey_pepper_secret_id: str = ""
    apikey_pepper_max_age_s: int = 900
    metrics_namespace: str = "OpenWOP"
    eval_max_concurrency: int = 4
    # Trials one child execution of an eval's Map runs, one after another (ItemBatcher, decision 0163): the most;
    # Prepare takes fewer when a suite is too small to keep ``eval_max_concurrency`` children busy
    eval_trials_per_batch: int = 50
    # Task-trials one Finish invocation of an eval appends (whole tasks, ~15,000 events at 2,000): a larger suite
    # is finished in pages, a Step Functions loop.
    eval_finish_page_trials: int = 2000
    # Advance tasks one run/fork execution makes before it continues in a new execution (continue-as-new): each
    # task is ~10 history events, so 1,000 keeps an execution under ~10,000 of Step Functions' 25,000.
    execution_max_tasks: int = 1000
    run_starts_per_minute: int = 0  # per tenant; 0: no quota
    # Runs (workflow and eval runs) a tenant may have started and not ended; past it a new run waits ``pending`` and
    # starts when one ends (shared/services/admission.py, decision 0160); 0: no cap
    tenant_max_runs_in_flight: int = 100
    # Long polls, and SSE streams, a tenant may hold waiting at once; past it 429 (shared/services/held.py); 0: none
    tenant_max_held_requests: int = 20
    # per-tenant token bucket on every write request (shared/services/ratelimits.py); rate 0: off
    tenant_write_rate: float = 20.0  # tokens per second
    tenant_write_burst: int = 40
    openai_base_url: str = ""  # the OpenAI-compatible endpoint an agent binding without baseUrl uses
    model_call_attempts: int = 3  # per model call: a retryable provider error is tried this often in the task
    # How old a start-outbox marker must be before a sweep settles it: longer than any create may take (the create
    # functions time out at 30 s), so a sweep never meets a create still writing (decision 0150).
    start_sweep_grace_s: int = 60
    judge_provider: str = ""  # the default rubric judge (RFC 0244) when an eval run names none
    judge_model: str = ""
    # the deployment stage (CDK context ``stage``; ``local`` for the embedded host). ``prod`` never serves mocks.
    stage: str = "local"
    # model providers this host runs (canonical ids, see shared.providers); the mock is refused in ``prod``
    model_providers: tuple[str, ...] = ("bedrock", "openai", "mock")
    # JSON price overrides (USD per 1M tokens), see shared.providers.prices; "" = the built-in table
    model_prices: str = ""
    # An external agent's session (decision 0143): seconds from creation until an uncompleted session fails
    # ``session_expired``; and the gateway's public root (``GATEWAY_URL``; "" = the request's own origin)
    session_ttl_s: int = 900
    gateway_url: str = ""

    def state_machine_arn(self, key: str) -> str:
        """The ARN of the manifest's state machine ``key`` ("" where this process has none)."""
        return dict(self.state_machine_arns).get(key, "")

    @property
    def mock_providers_allowed(self) -> bool:
        """The spec's mock providers run only where they are enabled and never in ``prod``."""
        return "mock" in self.model_providers and self.stage != "prod"

    webhook_queue_url: str = ""
    webhook_max_attempts: int = 8  # the queue's maxReceiveCount: attempts before the dead-letter queue
    webhook_retry_base_s: int = 30  # exponential backoff: base * 2^(attempt-1), capped
    webhook_retry_cap_s: int = 900
    # Local mode only (never set on AWS): every backoff delay divided by this, the schedule's shape kept (local 30)
    webhook_retry_divisor: int = 1
    webhook_rotation_overlap_s: int = 86_400
    webhook_dead_letter_days: int = 14
    webhook_timeout_s: float = 10.0
    # Seconds a warm fan-out keeps a tenant's subscriptions (decision 0151): a new one beside a settled one is fanned
    # out events stored from at most this long (plus an eventually consistent read's lag) after its 201
    webhook_subscription_cache_s: float = 2.0
    # OpenTelemetry spans (shared/telemetry/otel.py): the OTLP/HTTP traces endpoint; "" = off (no span, nothing
    # imported). Prompt, message and tool-argument text reach spans only with the opt-in below.
    tracing_endpoint: str = ""
    tracing_capture_content: bool = False
    signing_key_id: str = ""  # the KMS key webhook signing secrets are encrypted with


def _env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def _model_prices(raw: str) -> str:
    """``MODEL_PRICES`` as given, once it parses (a malformed price table fails the cold start, like a bad int)."""
    from shared.providers.prices import parse_overrides

    parse_overrides(raw)
    return raw


# The unreachable fixture destination of the effect-seam fire seam (api/seams-v2.yaml fireEffectSeam): a core.http
# node of a fired run sends to it after its effect is claimed; on loopback port 1 the connection is refused (or the
# egress guard refuses loopback first), so the witness is the effect ledger, never a delivery.
SEAM_FIXTURE_TARGET = "127.0.0.1:1"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Read the environment once. Tests that change it call ``get_settings.cache_clear()``."""
    t = {tbl.key: _env(tbl.env_var, tbl.local_name) for tbl in manifest.TABLES}
    sm = {m.key: _env(m.env_var) for m in manifest.STATE_MACHINES}
    cursor = next(s for s in manifest.SECRETS if s.key == manifest.CURSOR)
    pepper = next(s for s in manifest.SECRETS if s.key == manifest.APIKEY_PEPPER)
    tombstone = next(s for s in manifest.SECRETS if s.key == manifest.TOMBSTONE)
    webhooks = manifest.queue(manifest.WEBHOOKS)
    signing = manifest.kms_key(manifest.SIGNING)
    allow = tuple(h.strip() for h in _env("HTTP_ALLOWLIST").split(",") if h.strip())
    seams = _env("OPENWOP_CONFORMANCE_SEAMS", "false").strip().lower() == "true"
    if seams and SEAM_FIXTURE_TARGET not in allow:
        allow += (SEAM_FIXTURE_TARGET,)  # the fire seam's destination: loopback port 1, where nothing listens
    return Settings(
        runs_table=t[manifest.RUNS],
        events_table=t[manifest.EVENTS],
        tool_calls_table=t[manifest.TOOL_CALLS],
        idempotency_table=t[manifest.IDEMPOTENCY],
        host_table=t[manifest.HOST],
        signing_table=t[manifest.SIGNING],
        fixtures_bucket=_env(manifest.BUCKETS[0].env_var, manifest.BUCKETS[0].local_name),
        state_machine_arns=tuple(sm.items()),
        retention_days=int(_env("RETENTION_DAYS", "30")),
        max_poll_wait_s=int(_env("MAX_POLL_WAIT_SECONDS", "25")),
        conformance_enabled=_env("OPENWOP_CONFORMANCE", "true").lower() == "true",
        conformance_seams=seams,
        host_name=_env("HOST_NAME", "openwop-serverless"),
        build_id=_env("BUILD_ID", "unknown"),
        http_allowlist=allow,
        run_tool_call_budget=int(_env("RUN_TOOL_CALL_BUDGET", "1000")),
        cursor_secret_id=_env(cursor.env_var, cursor.local_name),
        tombstone_secret_id=_env(tombstone.env_var, tombstone.local_name),
        egress_allow=tuple(e.strip() for e in _env("EGRESS_ALLOW").split(",") if e.strip()),
        tool_response_max_bytes=int(_env("TOOL_RESPONSE_MAX_BYTES", "1000000")),
        credentials_prefix=_env("CREDENTIALS_SECRET_PREFIX", "openwop-serverless/credentials"),
        apikey_pepper_secret_id=_env(pepper.env_var, pepper.local_name),
        apikey_pepper_max_age_s=int(_env("APIKEY_PEPPER_MAX_AGE_SECONDS", "900")),
        metrics_namespace=_env("METRICS_NAMESPACE", "OpenWOP"),
        eval_max_concurrency=max(1, int(_env("EVAL_MAX_CONCURRENCY", "4"))),
        eval_finish_page_trials=max(1, int(_env("EVAL_FINISH_PAGE_TRIALS", "2000"))),
        eval_trials_per_batch=max(1, int(_env("EVAL_TRIALS_PER_BATCH", "50"))),
        execution_max_tasks=max(2, int(_env("EXECUTION_MAX_TASKS", "1000"))),
        run_starts_per_minute=max(0, int(_env("RUN_STARTS_PER_MINUTE", "0"))),
        tenant_max_runs_in_flight=max(0, int(_env("TENANT_MAX_RUNS_IN_FLIGHT", "100"))),
        tenant_max_held_requests=max(0, int(_env("TENANT_MAX_HELD_REQUESTS", "20"))),
        tenant_write_rate=max(0.0, float(_env("TENANT_WRITE_RATE", "20"))),
        tenant_write_burst=max(1, int(_env("TENANT_WRITE_BURST", "40"))),
        openai_base_url=_env("OPENAI_BASE_URL"),
        model_call_attempts=max(1, int(_env("MODEL_CALL_ATTEMPTS", "3"))),
        start_sweep_grace_s=max(0, int(_env("START_SWEEP_GRACE_SECONDS", "60"))),
        judge_provider=_env("JUDGE_PROVIDER"),
        judge_model=_env("JUDGE_MODEL"),
        stage=_env("STAGE", "local").strip() or "local",
        model_providers=tuple(
            p.strip() for p in _env("MODEL_PROVIDERS", "bedrock,openai,mock").split(",") if p.strip()
        ),
        model_prices=_model_prices(_env("MODEL_PRICES")),
        webhook_queue_url=_env(webhooks.env_var),
        webhook_max_attempts=max(1, int(_env("WEBHOOK_MAX_ATTEMPTS", str(webhooks.max_receives)))),
        webhook_retry_base_s=max(0, int(_env("WEBHOOK_RETRY_BASE_SECONDS", str(webhooks.visibility_s)))),
        webhook_retry_cap_s=max(1, int(_env("WEBHOOK_RETRY_CAP_SECONDS", "900"))),
        webhook_retry_divisor=max(1, int(_env("WEBHOOK_RETRY_DIVISOR", "1"))),
        webhook_rotation_overlap_s=min(604_800, max(60, int(_env("WEBHOOK_ROTATION_OVERLAP_SECONDS", "86400")))),
        webhook_dead_letter_days=max(1, int(_env("WEBHOOK_DEAD_LETTER_DAYS", "14"))),
        webhook_subscription_cache_s=min(60.0, max(0.0, float(_env("WEBHOOK_SUBSCRIPTION_CACHE_SECONDS", "2")))),
        # the OpenTelemetry SDK's own names: an operator who knows OTLP knows these
        tracing_endpoint=_env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").strip(),
        tracing_capture_content=_env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT").strip().lower()
        in ("1", "true", "yes", "on"),
        signing_key_id=_env(signing.env_var, signing.local_name),
        session_ttl_s=max(1, int(_env("SESSION_TTL_SECONDS", "900"))),
        gateway_url=_env("GATEWAY_URL").strip().rstrip("/"),
    )


CREDENTIALS_PREFIX_VAR = "CREDENTIALS_SECRET_PREFIX"
API_URL_OUTPUT = "ApiUrl"


def resource_env_vars() -> tuple[str, ...]:
    """The env vars that locate a deployment's resources (tables, bucket, state machines, secrets, credentials)."""
    return (
        tuple(t.env_var for t in manifest.TABLES)
        + tuple(b.env_var for b in manifest.BUCKETS)
        + tuple(m.env_var for m in manifest.STATE_MACHINES)
        + tuple(s.env_var for s in manifest.SECRETS)
        + tuple(q.env_var for q in manifest.QUEUES)
        + tuple(k.env_var for k in manifest.KEYS)
        + (CREDENTIALS_PREFIX_VAR,)
    )


def output_key(env_var: str) -> str:
    """The stack output that carries ``env_var``'s value: ``RUNS_TABLE`` -> ``RunsTableName``,
    ``RUN_STATE_MACHINE_ARN`` -> ``RunStateMachineArn``, ``PEPPER_SECRET_ID`` -> ``PepperSecretId``."""
    key = "".join(w.capitalize() for w in env_var.lower().split("_"))
    return f"{key}Name" if env_var.endswith(("_TABLE", "_BUCKET")) else key
