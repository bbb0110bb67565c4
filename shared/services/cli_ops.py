"""Operator commands behind ``openwop-serverless`` (shared/local/commands.py imports this lazily).

    openwop-serverless suites put FILE               -> put_suite(ports, FILE)
    openwop-serverless suites list | get SUITE [--version V] -> list_suites(ports), get_suite(ports, SUITE, V)
    openwop-serverless runs delete RUN_ID --tenant T -> erase_run(ports, RUN_ID, T)
    openwop-serverless runs reapply-erasures [--tombstones-from TABLE] -> reapply_erasures(ports, TABLE)

The CLI talks to the stack directly (no API key), as an operator: a suite it registers is host-wide (every
tenant may run it, like the conformance fixtures) unless a tenant is given. Each returns a line to print;
a refusal exits non-zero with the protocol error's message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shared.errors import ProtocolError
from shared.ports import Ports

MAX_LIST_PAGES = 1000  # 100,000 host-wide suites


def put_suite(ports: Ports, path: str, tenant: str | None = None) -> str:
    """Register the suite in FILE (host-wide, or for ``tenant``). Same rules as the HTTP extension."""
    from shared.services import suites

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"error: cannot read a JSON suite from {path}: {exc}") from exc
    try:
        if tenant:
            from shared.services import suite_runs

            status, body = suite_runs.register(ports, tenant, doc)
        else:
            status, body = suites.register(ports, suites.GLOBAL, doc)
    except ProtocolError as exc:
        detail = f" {json.dumps(exc.details)}" if exc.details else ""
        raise SystemExit(f"error: {exc.code}: {exc.message}{detail}") from exc
    return json.dumps({**body, "created": status == 201})


def list_suites(ports: Ports) -> str:
    """The host-wide suites an operator registered, one JSON object a line (``GET .../eval-suites`` for ``*``)."""
    from shared.services import suites

    listed: list[dict[str, Any]] = []
    params = {"limit": "100"}
    for _ in range(MAX_LIST_PAGES):
        page = suites.list_suites(ports, suites.GLOBAL, params)
        listed.extend(page["suites"])
        if "nextCursor" not in page:
            break
        params = {"limit": "100", "cursor": page["nextCursor"]}
    return "\n".join(json.dumps(s) for s in listed) or "(no host-wide suites)"


def get_suite(ports: Ports, suite_id: str, version: str | None = None) -> str:
    """A host-wide suite's versions, or one version's document."""
    from shared.services import suites

    try:
        got = (
            suites.get_version(ports, suites.GLOBAL, suite_id, version)
            if version
            else suites.get_suite(ports, suites.GLOBAL, suite_id)
        )
    except ProtocolError as exc:
        raise SystemExit(f"error: {exc.code}: {exc.message}") from exc
    return json.dumps(got)


def erase_run(ports: Ports, run_id: str, tenant: str) -> str:
    """Erase a run of ``tenant`` and every copy derived from it (idempotent)."""
    from shared.services.common import Caller
    from shared.services.erasure import erase_run as erase

    try:
        erase(ports, Caller(tenant, "operator-cli"), run_id)
    except ProtocolError as exc:
        raise SystemExit(f"error: {exc.code}: {exc.message}") from exc
    return json.dumps({"runId": run_id, "erased": True})


def reapply_erasures(ports: Ports, tombstones_from: str = "") -> str:
    """After a restore: erase again every restored run that has a tombstone, with the tombstones of
    ``tombstones_from`` (the replaced runs table) copied in first. Idempotent."""
    from shared.services.erasure import reapply_erasures as reapply

    return json.dumps(reapply(ports, tombstones_from or None))


def create_key(ports: Ports, tenant: str, name: str = "") -> str:
    """A new API key for ``tenant``: the key itself is printed this once and stored only as a peppered hash."""
    from shared.services import auth

    try:
        key, meta = auth.create_api_key(ports, tenant, name)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from exc
    return json.dumps({**meta, "apiKey": key})


def list_keys(ports: Ports, tenant: str) -> str:
    """The tenant's keys, one JSON object a line: id, name, creation time, pepper state; never a key."""
    from shared.services import auth

    return "\n".join(json.dumps(k) for k in auth.list_api_keys(ports, tenant)) or f"(no keys for tenant {tenant})"


def revoke_key(ports: Ports, key_id: str) -> str:
    """Revoke a key by id: it stops authenticating everywhere within the auth cache TTL (60 s)."""
    from shared.services import auth

    if not auth.revoke_api_key(ports, key_id):
        raise SystemExit(f"error: no API key with id {key_id}")
    return json.dumps({"keyId": key_id, "revoked": True, "effectiveWithinSeconds": int(auth.HIT_TTL_S)})


def rotate_pepper(ports: Ports) -> str:
    """Start a pepper rotation (new current pepper; keys hashed under the old one keep working)."""
    from shared.services import auth

    auth.rotate_pepper(ports)
    return json.dumps({"pepper": "rotated", "previousKept": True})


def finish_pepper_rotation(ports: Ports) -> str:
    """Finish a pepper rotation: keys still hashed under the previous pepper stop working."""
    from shared.services import auth

    stale = auth.finish_pepper_rotation(ports)
    return json.dumps({"pepper": "rotation finished", "previousKept": stale.previous is not None})


def seed(
    ports: Ports, sets: str, tenants: str = "", demo_tools_url: str = "", demo_mcp_url: str = "", stage: str = ""
) -> str:
    """Seed the conformance fixtures and/or the demo (``shared.services.seed.seed_stack``, as the deploy-time
    custom resource does); refused for the ``prod`` stage. One JSON line: what was seeded."""
    from shared.services import seed as seeding

    try:
        plan = seeding.seed_plan(
            sets, tenants=tenants, demo_tools_url=demo_tools_url, demo_mcp_url=demo_mcp_url, stage=stage or None
        )
        return json.dumps(seeding.seed_stack(ports, plan))
    except seeding.SeedPlanError as exc:
        raise SystemExit(f"error: {exc}") from exc
    except ProtocolError as exc:
        raise SystemExit(f"error: {exc.code}: {exc.message}") from exc
