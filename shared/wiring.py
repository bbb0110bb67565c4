"""build_ports(settings): the only module that builds AWS clients and picks implementations."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from shared.clock import SystemClock, SystemIds
from shared.ports import Ports
from shared.settings import Settings, get_settings

_override: Ports | None = None


def _client(service: str) -> Any:
    import boto3  # lazy: keeps handler import paths lean
    from botocore.config import Config

    cfg = Config(retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=5, read_timeout=30)
    return boto3.session.Session().client(service, config=cfg)


class UrllibHttp:
    """The outbound HTTP seam used by core.http (guarded by the EffectGuard and an allowlist)."""

    def request(self, method: str, url: str, body: Any, headers: dict[str, str], timeout_s: float) -> tuple[int, Any]:
        import json
        import urllib.error
        import urllib.request

        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 - allowlisted by the caller
                raw = resp.read().decode("utf-8", errors="replace")
                status = resp.status
        except urllib.error.HTTPError as err:
            raw = err.read().decode("utf-8", errors="replace")
            status = err.code
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw


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
        http=UrllibHttp(),
        secrets=SecretsManagerSecretStore(lambda: _client("secretsmanager")),
        settings=settings,
    )


@lru_cache(maxsize=2)
def _cached(settings: Settings) -> Ports:
    return build_ports(settings)


def get_ports() -> Ports:
    """Ports for this process, built once per cold start (per settings). Tests may call ``set_ports``."""
    return _override if _override is not None else _cached(get_settings())


def set_ports(ports: Ports | None) -> None:
    global _override
    _override = ports


def reset_ports() -> None:
    global _override
    _override = None
    _cached.cache_clear()
