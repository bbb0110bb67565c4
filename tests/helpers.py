"""Small test-only helpers: unique ids, execution polling, and a module-backed Lambda handler for canaries."""

from __future__ import annotations

import time
import uuid
from typing import Any

TERMINAL = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")


def unique(prefix: str) -> str:
    """A fresh name so tests never share data (DynamoDB keys, function and state machine names)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def wait_for_execution(sfn: Any, execution_arn: str, timeout: float = 15.0) -> dict[str, Any]:
    """Poll ``describe_execution`` until the execution leaves RUNNING; fail the test on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        described: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
        if described["status"] in TERMINAL:
            return described
        if time.monotonic() > deadline:
            raise AssertionError(f"execution still {described['status']} after {timeout}s: {execution_arn}")
        time.sleep(0.05)


def eventually(check: Any, timeout: float = 5.0, interval: float = 0.05) -> Any:
    """Poll ``check()`` until it returns a truthy value; fail the test on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    """Used as a manifest function module by the Lambda registry canary (imported lazily by the patch)."""
    return {
        "echo": event,
        "functionName": context.function_name,
        "requestId": context.aws_request_id,
        "memory": context.memory_limit_in_mb,
        "remainingMs": context.get_remaining_time_in_millis(),
    }


def ports() -> Any:
    """The ports of this process (the local stack's, once ``local_aws`` is up)."""
    from shared.wiring import get_ports

    return get_ports()
