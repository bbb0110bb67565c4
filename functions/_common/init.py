"""A function's init: what its first request would build, built in Lambda's init phase instead (decision 0167).

Lambda sets ``AWS_LAMBDA_INITIALIZATION_TYPE`` in every function's environment; the local host's in-process functions
and the tests do not, so there nothing changes: a client is still built on its first use.
"""

from __future__ import annotations

import os

from functions._common.observability import logger

LAMBDA_INIT_ENV = "AWS_LAMBDA_INITIALIZATION_TYPE"


def prepare_at_init(*, api_key: bool) -> None:
    """In Lambda's init phase, build the ports and the DynamoDB client (its service model and endpoint rules), and
    with ``api_key`` read the API-key pepper (Secrets Manager's client and the secret, kept for its max age). A
    failure is left to the first request, which meets it again and answers it as the protocol says."""
    if not os.environ.get(LAMBDA_INIT_ENV):
        return
    try:
        from shared.wiring import build_dynamodb_client, get_ports

        ports = get_ports()
        build_dynamodb_client(ports)
        if api_key:
            from shared.services.auth import peppers

            peppers(ports)
    except Exception:  # noqa: BLE001 - init must not fail on what a request would report
        logger().warning("init could not prepare the first request's clients")
