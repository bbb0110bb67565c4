"""Small test-only helpers: unique ids, execution polling, and a module-backed Lambda handler for canaries."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def local_serve(tmp_path: Any) -> Iterator[dict[str, str]]:
    """``openwop-serverless serve`` on a free port in a subprocess (as ``make serve`` runs it), yielding the
    environment its printed ``export ...`` line gives a newcomer's shell; stopped on exit."""
    import os
    import subprocess
    import sys
    import threading
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "MOTO_", "OPENWOP_", "EGRESS_")) and not k.endswith(("_TABLE", "_BUCKET"))}
    env["PYTHONPATH"] = str(root)
    errors = (Path(tmp_path) / "serve.stderr").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "shared.local.cli", "serve", "--port", "0"], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=errors, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True).start()
    try:
        eventually(lambda: any("Ctrl-C" in line for line in lines), timeout=60)
        exports = next(line for line in lines if line.startswith("export "))
        tour_env = dict(env)
        for pair in exports.split()[1:]:
            name, _, value = pair.partition("=")
            tour_env[name] = value
        yield tour_env
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        errors.close()


class FakeTimer:
    """A monotonic clock a test moves by hand (``timer.now += 61``)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
