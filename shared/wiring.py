"""build_ports(settings): the only module that builds AWS clients and picks implementations."""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

from shared.clock import SystemClock, SystemIds
from shared.ports import Ports, StackOutputs
from shared.settings import Settings, get_settings

_override: Ports | None = None
_build_lock = threading.Lock()  # one build per settings even when threads race (local mode's background workers)


def _client(service: str, region: str | None = None) -> Any:
    import boto3  # lazy: keeps handler import paths lean
    from botocore.config import Config

    cfg = Config(retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=5, read_timeout=30)
    return boto3.session.Session(region_name=region).client(service, config=cfg)


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

    def list_tools(self, url: str, headers: dict[str, str], *, timeout_s: float) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = self._get().list_tools(url, headers, timeout_s=timeout_s)
        return out

    def call_tool(self, url: str, headers: dict[str, str], name: str, arguments: dict[str, Any], *,
                  meta: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        out: dict[str, Any] = self._get().call_tool(url, headers, name, arguments, meta=meta, timeout_s=timeout_s)
        return out


def _egress(settings: Settings) -> Any:
    from shared.transports.egress import EgressPolicy

    return EgressPolicy.from_entries(settings.egress_allow)


def build_ports(settings: Settings) -> Ports:
    from shared.orchestration.step_functions import StepFunctionsOrchestrator
    from shared.storage.dynamodb import (
        DynamoEventStore,
        DynamoHostStore,
        DynamoIdempotencyStore,
        DynamoRunStore,
        DynamoToolCallStore,
        S3BlobStore,
    )
    from shared.storage.secrets import SecretsManagerSecretStore
    from shared.storage.sqs import SqsQueue
    from shared.transports.http import GuardedHttpTransport

    ddb = _client("dynamodb")
    clock = SystemClock()
    blobs = S3BlobStore(_client("s3"), settings.fixtures_bucket)
    return Ports(
        runs=DynamoRunStore(ddb, settings.runs_table, clock, blobs),
        events=DynamoEventStore(ddb, settings.events_table, settings.runs_table, blobs),
        tool_calls=DynamoToolCallStore(ddb, settings.tool_calls_table, settings.runs_table, blobs),
        host=DynamoHostStore(ddb, settings.host_table, settings.runs_table),
        blobs=blobs,
        idempotency=DynamoIdempotencyStore(ddb, settings.idempotency_table),
        orchestrator=StepFunctionsOrchestrator(
            _client("stepfunctions"),
            {"run": settings.run_state_machine_arn, "eval": settings.eval_state_machine_arn,
             "fork": settings.fork_state_machine_arn},
        ),
        clock=clock,
        ids=SystemIds(clock),
        http=GuardedHttpTransport(_egress(settings)),
        mcp=_LazyMcp(settings),
        secrets=SecretsManagerSecretStore(lambda: _client("secretsmanager")),
        settings=settings,
        queues={"webhooks": SqsQueue(lambda: _client("sqs"), settings.webhook_queue_url)},
    )


@lru_cache(maxsize=2)
def _cached(settings: Settings) -> Ports:
    return build_ports(settings)


def get_ports() -> Ports:
    """Ports for this process, built once per cold start (per settings). Tests may call ``set_ports``."""
    if _override is not None:
        return _override
    with _build_lock:
        return _cached(get_settings())


def set_ports(ports: Ports | None) -> None:
    global _override
    _override = ports


def reset_ports() -> None:
    global _override
    _override = None
    _cached.cache_clear()
