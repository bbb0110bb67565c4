"""Where the embedded AWS's resources are: the names, ARNs and endpoint the runtime reads from the environment
(the same variables CDK sets on the deployed functions), for the local stack ``shared.local.stack`` starts."""

from __future__ import annotations

import os

from shared import manifest
from shared.local.context import DEFAULT_ACCOUNT, DEFAULT_REGION

REGION = DEFAULT_REGION
ACCOUNT = DEFAULT_ACCOUNT


def state_machine_arn(sm: manifest.StateMachine) -> str:
    return f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{sm.local_name}"


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
