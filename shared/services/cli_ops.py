"""Operator commands behind ``openwop-serverless`` (shared/local/cli.py imports this lazily).

    openwop-serverless suites put FILE               -> put_suite(ports, FILE)
    openwop-serverless runs delete RUN_ID --tenant T -> erase_run(ports, RUN_ID, T)

The CLI talks to the stack directly (no API key), as an operator: a suite it registers is host-wide (every
tenant may run it, like the conformance fixtures) unless a tenant is given. Each returns a line to print;
a refusal exits non-zero with the protocol error's message.
"""

from __future__ import annotations

import json
from pathlib import Path

from shared.errors import ProtocolError
from shared.ports import Ports


def put_suite(ports: Ports, path: str, tenant: str | None = None) -> str:
    """Register the suite in FILE (host-wide, or for ``tenant``). Same rules as the HTTP extension."""
    from shared.services import suites

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"error: cannot read a JSON suite from {path}: {exc}") from exc
    try:
        status, body = suites.register(ports, tenant or suites.GLOBAL, doc)
    except ProtocolError as exc:
        detail = f" {json.dumps(exc.details)}" if exc.details else ""
        raise SystemExit(f"error: {exc.code}: {exc.message}{detail}") from exc
    return json.dumps({**body, "created": status == 201})


def erase_run(ports: Ports, run_id: str, tenant: str) -> str:
    """Erase a run of ``tenant`` and every copy derived from it (idempotent)."""
    from shared.services.common import Caller
    from shared.services.erasure import erase_run as erase

    try:
        erase(ports, Caller(tenant, "operator-cli"), run_id)
    except ProtocolError as exc:
        raise SystemExit(f"error: {exc.code}: {exc.message}") from exc
    return json.dumps({"runId": run_id, "erased": True})
