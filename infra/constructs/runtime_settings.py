"""Runtime settings an operator sets from CDK context (``-c key=value`` or cdk.json), as the functions' environment.

Each entry maps one context key to one env var that ``shared.settings.get_settings`` reads. A key that is not given
leaves the variable unset, so the code's default applies (the defaults are in ``shared.settings``). Values are
checked at synthesis: a non-integer budget or a ``conformance`` other than true/false fails ``cdk synth`` with one
line, not a function that crashes on its first cold start.

The older keys with a construct of their own (``retentionDays``, ``metricsNamespace``, ``evalMaxConcurrency``,
``runStartsPerMinute``, ``egressAllow``) stay where they were set; they are listed in ``OTHER_CONTEXT`` so the
docs and the settings-coverage test see every operator setting in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from constructs import Construct

Kind = Literal["int", "bool", "list", "text"]


@dataclass(frozen=True)
class ContextSetting:
    context: str  # the CDK context key
    env_var: str  # the variable shared.settings reads
    kind: Kind
    doc: str


RUNTIME_SETTINGS: tuple[ContextSetting, ...] = (
    ContextSetting(
        "httpAllowlist",
        "HTTP_ALLOWLIST",
        "list",
        "hosts (`host` or `host:port`) `core.http` nodes may call; default none",
    ),
    ContextSetting("runToolCallBudget", "RUN_TOOL_CALL_BUDGET", "int", "tool calls per run; default 1000"),
    ContextSetting(
        "sessionTtlSeconds",
        "SESSION_TTL_SECONDS",
        "int",
        "seconds an external agent's session or waiting eval trial stays open before it fails `session_expired`; "
        "default 900",
    ),
    ContextSetting(
        "toolResponseMaxBytes",
        "TOOL_RESPONSE_MAX_BYTES",
        "int",
        "largest tool or HTTP-node response read; default 1000000",
    ),
    ContextSetting(
        "conformance", "OPENWOP_CONFORMANCE", "bool", "the conformance built-in tools (true/false); default true"
    ),
    ContextSetting(
        "conformanceSeams",
        "OPENWOP_CONFORMANCE_SEAMS",
        "bool",
        "certification stage only: serve the conformance seams profile (/conformance/seams/...: seeding "
        "an era-2 log, firing an effect seam) and advertise it (true/false); default false, and the seams "
        "refuse every request without it",
    ),
    ContextSetting(
        "maxPollWaitSeconds",
        "MAX_POLL_WAIT_SECONDS",
        "int",
        "longest long-poll wait of `GET /runs/{runId}/events/poll`; default 25",
    ),
    ContextSetting(
        "apiKeyPepperMaxAgeSeconds",
        "APIKEY_PEPPER_MAX_AGE_SECONDS",
        "int",
        "how long a function keeps the API-key pepper before re-reading it; default 900",
    ),
    ContextSetting("hostName", "HOST_NAME", "text", "the host name discovery reports; default openwop-serverless"),
    ContextSetting(
        "buildId",
        "BUILD_ID",
        "text",
        "the build id discovery reports and every run records (e.g. a commit); default the code asset's content hash",
    ),
    ContextSetting(
        "tenantWriteRate",
        "TENANT_WRITE_RATE",
        "int",
        "write requests per second per tenant (token bucket refill; 0: off); default 20",
    ),
    ContextSetting(
        "tenantWriteBurst",
        "TENANT_WRITE_BURST",
        "int",
        "write requests a tenant may send at once (token bucket size); default 40",
    ),
    ContextSetting(
        "tenantMaxRunsInFlight",
        "TENANT_MAX_RUNS_IN_FLIGHT",
        "int",
        "workflow and eval runs a tenant may have started and not ended; past it a new run waits `pending` and "
        "starts when one of the tenant's runs ends (0: no cap); default 100",
    ),
    ContextSetting(
        "tenantMaxHeldRequests",
        "TENANT_MAX_HELD_REQUESTS",
        "int",
        "long polls, and as many SSE streams, a tenant may hold waiting at once; past it `429 rate_limited` with "
        "`Retry-After` (0: no limit); default 20",
    ),
    ContextSetting(
        "modelProviders",
        "MODEL_PROVIDERS",
        "list",
        "model providers agents may use (bedrock, openai, mock); default all three (never mock in prod)",
    ),
    ContextSetting(
        "modelPrices",
        "MODEL_PRICES",
        "text",
        "JSON price overrides, USD per 1M tokens per model; default the built-in table",
    ),
    ContextSetting(
        "openaiBaseUrl",
        "OPENAI_BASE_URL",
        "text",
        "the OpenAI-compatible endpoint for agent bindings without baseUrl; default none",
    ),
    ContextSetting(
        "modelCallAttempts",
        "MODEL_CALL_ATTEMPTS",
        "int",
        "tries per model call when the provider says it may be retried; default 3",
    ),
    ContextSetting(
        "judgeProvider",
        "JUDGE_PROVIDER",
        "text",
        "the default rubric judge's provider when an eval names none; default none",
    ),
    ContextSetting("judgeModel", "JUDGE_MODEL", "text", "the default rubric judge's model; default none"),
    ContextSetting(
        "executionMaxTasks",
        "EXECUTION_MAX_TASKS",
        "int",
        "Advance tasks per Step Functions execution before a run continues in a new one; default 1000",
    ),
    ContextSetting(
        "evalFinishPageTrials",
        "EVAL_FINISH_PAGE_TRIALS",
        "int",
        "task-trials whose events one eval Finish invocation appends (larger suites loop); default 2000",
    ),
    ContextSetting(
        "evalTrialsPerBatch",
        "EVAL_TRIALS_PER_BATCH",
        "int",
        "the most trials one child execution of an eval's Map runs, one after another; default 50",
    ),
    ContextSetting(
        "webhookRetryBaseSeconds",
        "WEBHOOK_RETRY_BASE_SECONDS",
        "int",
        "first webhook retry delay, doubled per attempt; default the queue's visibility timeout",
    ),
    ContextSetting(
        "webhookRetryCapSeconds",
        "WEBHOOK_RETRY_CAP_SECONDS",
        "int",
        "longest delay between two webhook attempts; default 900",
    ),
    ContextSetting(
        "webhookRotationOverlapSeconds",
        "WEBHOOK_ROTATION_OVERLAP_SECONDS",
        "int",
        "how long a rotated webhook secret still signs (60..604800); default 86400",
    ),
    ContextSetting(
        "webhookDeadLetterDays", "WEBHOOK_DEAD_LETTER_DAYS", "int", "how long dead-letter records are kept; default 14"
    ),
    ContextSetting(
        "tracingEndpoint",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "text",
        "the OTLP/HTTP traces URL spans are sent to (OTLP/JSON; e.g. a collector beside the function, "
        "http://localhost:4318/v1/traces); default none: no spans",
    ),
    ContextSetting(
        "webhookSubscriptionCacheSeconds",
        "WEBHOOK_SUBSCRIPTION_CACHE_SECONDS",
        "int",
        "seconds a warm fan-out keeps a tenant's subscriptions it found (a new subscription reaches runs already "
        "going within this plus about 1 s; a run's first batch always reads afresh); default 2, at most 60",
    ),
    ContextSetting(
        "startSweepGraceSeconds",
        "START_SWEEP_GRACE_SECONDS",
        "int",
        "seconds a run written but not started waits before the start sweep starts or fails it (more than a create "
        "may take: its function's 30 s timeout); default 60",
    ),
    ContextSetting(
        "tracingCaptureContent",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        "bool",
        "prompts, messages and tool arguments/results in spans (true/false); default false",
    ),
)

# Set by the stack itself from the manifest, never from context: env var -> what fixes it.
STACK_DERIVED: Mapping[str, str] = {
    "WEBHOOK_MAX_ATTEMPTS": "the webhook queue's maxReceiveCount (shared/manifest.py), so attempts match the redrive",
    "GATEWAY_URL": "the agent gateway's function URL (infra/constructs/functions.py), given to the functions that "
    "hand out gateway URLs; locally the front's own base URL",
    "WEBHOOK_RETRY_DIVISOR": "local mode only (shared/local/stack.py sets 30); never set on AWS, so deployed delays "
    "are the schedule's own (divisor 1)",
}

# Context keys handled by their own constructs (infra/constructs/functions.py, infra/app.py): context -> env var.
OTHER_CONTEXT: Mapping[str, str] = {
    "retentionDays": "RETENTION_DAYS",
    "metricsNamespace": "METRICS_NAMESPACE",
    "evalMaxConcurrency": "EVAL_MAX_CONCURRENCY",
    "runStartsPerMinute": "RUN_STARTS_PER_MINUTE",
    "egressAllow": "EGRESS_ALLOW",
    "stage": "STAGE",
}


class ContextSettingError(ValueError):
    """A context value that the runtime could not use."""


def _check(setting: ContextSetting, raw: object) -> str:
    if isinstance(raw, list | tuple) and setting.kind == "list":  # cdk.json may hold a JSON list
        raw = ",".join(str(v) for v in raw)
    value = str(raw).strip()
    if setting.kind == "int":
        try:
            if int(value) < 0:
                raise ValueError
        except ValueError:
            raise ContextSettingError(f"context {setting.context}={raw!r}: expected a non-negative integer") from None
    elif setting.kind == "bool":
        if value.lower() not in ("true", "false"):
            raise ContextSettingError(f"context {setting.context}={raw!r}: expected true or false")
        value = value.lower()
    elif setting.kind == "list":
        value = ",".join(p.strip() for p in value.split(",") if p.strip())
    return value


def runtime_environment(scope: Construct) -> dict[str, str]:
    """The env vars of the runtime settings given in ``scope``'s context (the others stay unset)."""
    env: dict[str, str] = {}
    for setting in RUNTIME_SETTINGS:
        raw = scope.node.try_get_context(setting.context)
        if raw is not None and str(raw) != "":
            env[setting.env_var] = _check(setting, raw)
    if env.get("OPENWOP_CONFORMANCE_SEAMS") == "true" and str(scope.node.try_get_context("stage") or "") == "prod":
        raise ContextSettingError("conformanceSeams is refused in the prod stage (a certification-stage setting)")
    return env
