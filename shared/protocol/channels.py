"""Deployment channels (RFC 0082): which version a channel serves, from the deployment records of an agent's
versions. Pure: the host's deployments service and the eval CLI (over ``GET /agents/{agentId}/deployments``) use it."""

from __future__ import annotations

from typing import Any

from shared.protocol.semver import semver_key


def serving(records: dict[str, dict[str, Any]], channel: str) -> str | None:
    """The version a channel serves (``latest``: the highest active version), or None. ``records`` are the
    deployment records by version (stored or as ``GET /agents/{agentId}/deployments`` lists them)."""
    active = sorted((v for v, r in records.items() if r["state"] == "active"), key=semver_key, reverse=True)
    if channel == "latest":
        return active[0] if active else None
    return next((v for v in active if channel in (records[v].get("channels") or [])), None)
