"""Reading the versions a tenant registered of a model-backed agent: the one module that knows their layout.

Versions are stored through ``Ports.agents`` (one immutable item per version). Registration and the inventory
(``agents``) and deployment channels (``deployments``) read them here, so neither of those imports the other for it.
"""

from __future__ import annotations

from typing import Any

from shared.ports import Ports
from shared.protocol.semver import semver_key

Row = tuple[str, dict[str, Any]]  # (version, the stored document)


def rows(ports: Ports, tenant: str, agent_id: str) -> list[Row]:
    """The agent's versions, lowest first (semver order)."""
    return sorted(ports.agents.list_versions(tenant, agent_id), key=lambda r: semver_key(r[0]))


def versions(ports: Ports, tenant: str, agent_id: str) -> list[str]:
    return [v for v, _ in rows(ports, tenant, agent_id)]


def latest_row(ordered: list[Row]) -> Row | None:
    """The highest release; a pre-release only when the agent has no release yet."""
    releases = [r for r in ordered if "-" not in r[0].split("+", 1)[0]]
    pick = releases or ordered
    return pick[-1] if pick else None


def latest(ports: Ports, tenant: str, agent_id: str) -> str | None:
    got = latest_row(rows(ports, tenant, agent_id))
    return got[0] if got else None


def exists(ports: Ports, tenant: str, agent_id: str, version: str) -> bool:
    return ports.agents.get_version(tenant, agent_id, version) is not None
