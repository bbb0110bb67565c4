"""Where the embedded AWS's resources are: the names, ARNs and endpoint the runtime reads from the environment
(the same variables CDK sets on the deployed functions), for the local stack ``shared.local.stack`` starts."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from shared import manifest
from shared.local.context import DEFAULT_ACCOUNT, DEFAULT_REGION

REGION = DEFAULT_REGION
ACCOUNT = DEFAULT_ACCOUNT


def state_machine_arn(sm: manifest.StateMachine) -> str:
    return f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{sm.local_name}"


def run_execution_arn(machine: str, run_id: str, generation: int) -> str:
    """The ARN of generation ``generation`` of ``run_id``'s executions on ``machine`` (``run``, ``fork`` or their
    hold machines, whose executions are named as the run's: decision 0191)."""
    from shared.orchestration.step_functions import execution_name

    spec = next(m for m in manifest.STATE_MACHINES if m.key == machine)
    name = execution_name(run_id, machine.removesuffix("_hold"), generation=generation)
    return state_machine_arn(spec).replace(":stateMachine:", ":execution:") + ":" + name


def run_executions(describe: Callable[[str], dict[str, Any] | None], kind: str, run_id: str) -> list[dict[str, Any]]:
    """Every execution of ``run_id`` (``kind``: ``run`` or ``fork``) on its chained machine and its hold machine
    (decisions 0191, 0192), as ``describe`` gives an ARN's (None: never started), generation by generation until
    one is on neither."""
    found: list[dict[str, Any]] = []
    for generation in range(100_000):
        here = [describe(run_execution_arn(m, run_id, generation)) for m in (kind, f"{kind}_hold")]
        if all(d is None for d in here):
            break
        found += [d for d in here if d is not None]
    return found


def resource_env() -> dict[str, str]:
    """The env vars the runtime reads to find the local resources (same names CDK sets on the functions)."""
    env = {t.env_var: t.local_name for t in manifest.TABLES}
    env.update({b.env_var: b.local_name for b in manifest.BUCKETS})
    env.update({sm.env_var: state_machine_arn(sm) for sm in manifest.STATE_MACHINES})
    env.update({sec.env_var: sec.local_name for sec in manifest.SECRETS})
    env.update({k.env_var: k.local_name for k in manifest.KEYS})
    endpoint = os.environ.get("AWS_ENDPOINT_URL", "http://127.0.0.1")
    env.update({q.env_var: f"{endpoint}/{ACCOUNT}/{q.local_name}" for q in manifest.QUEUES})  # moto's URL form
    return env


def endpoint_env(endpoint: str, access_key_id: str, secret_access_key: str) -> dict[str, str]:
    """The env vars that point boto3 (and moto's Step Functions interpreter) at a local moto endpoint, signing with
    its credential (``shared.local.endpoint_auth``: it refuses any other)."""
    port = endpoint.rsplit(":", 1)[-1].split("/", 1)[0]
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "MOTO_PORT": port,
        "AWS_ACCESS_KEY_ID": access_key_id,
        "AWS_SECRET_ACCESS_KEY": secret_access_key,
        "AWS_SESSION_TOKEN": "local",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }
