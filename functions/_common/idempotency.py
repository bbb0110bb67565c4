"""Idempotency-Key on mutating operations, through Powertools idempotency (DynamoDB layer).

The record key is (tenant, operation, key): no tenant can receive another tenant's stored answer.
Same key + same body -> the stored answer with ``OpenWOP-Idempotent-Replay: true``; same key +
different body -> ``409 idempotency_key_mismatch``; a duplicate still in flight ->
``409 idempotency_in_flight``. Refusals (exceptions) are not stored, so a corrected retry works.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from shared.errors import IdempotencyInFlightError, IdempotencyKeyMismatchError
from shared.services.common import Caller
from shared.settings import get_settings


@lru_cache(maxsize=1)
def _persistence() -> Any:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    return DynamoDBPersistenceLayer(table_name=get_settings().idempotency_table)


def idempotent(
    caller: Caller,
    operation: str,
    key: str | None,
    body: Any,
    context: Any,
    nonce: str,
    fn: Callable[[], tuple[int, dict[str, Any]]],
) -> tuple[int, dict[str, Any], bool]:
    """Run ``fn`` at most once per (tenant, operation, key). Returns (status, body, replayed)."""
    if key is None:
        status, out = fn()
        return status, out, False
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
    from aws_lambda_powertools.utilities.idempotency.exceptions import (
        IdempotencyAlreadyInProgressError,
        IdempotencyValidationError,
    )

    config = IdempotencyConfig(
        event_key_jmespath="scope",
        payload_validation_jmespath="body",
        expires_after_seconds=86400,
        raise_on_no_idempotency_key=True,
    )
    if context is not None and hasattr(context, "get_remaining_time_in_millis"):
        config.register_lambda_context(context)

    @idempotent_function(data_keyword_argument="request", persistence_store=_persistence(), config=config)
    def once(request: dict[str, Any]) -> dict[str, Any]:
        status, out = fn()
        return {"status": status, "body": out, "nonce": request["nonce"]}

    request = {"scope": f"{caller.tenant}#{operation}#{key}", "body": body, "nonce": nonce}
    try:
        result = once(request=request)
    except IdempotencyValidationError as exc:
        raise IdempotencyKeyMismatchError() from exc
    except IdempotencyAlreadyInProgressError as exc:
        raise IdempotencyInFlightError() from exc
    replayed = result["nonce"] != nonce
    run_id = result["body"].get("runId")
    if not replayed and isinstance(run_id, str):
        # The stored answer names a run: link the record to it so the run's erasure removes the record too.
        from shared.services.erasure import link_idempotency_record
        from shared.wiring import get_ports

        record_id = _persistence()._get_hashed_idempotency_key(request)
        if record_id:
            link_idempotency_record(get_ports(), run_id, record_id)
    return int(result["status"]), dict(result["body"]), replayed
