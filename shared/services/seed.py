"""Seeding: API keys (hashed) and the conformance fixtures. Idempotent: re-seeding changes nothing."""

from __future__ import annotations

from shared.ports import Ports
from shared.services import fixtures
from shared.services.auth import put_api_key

GLOBAL = "*"  # fixtures are runnable by every tenant


def seed_fixtures(ports: Ports) -> list[str]:
    seeded = []
    for fid, doc in fixtures.workflows().items():
        ports.host.put_item(f"WORKFLOW#{GLOBAL}", fid, doc)
        seeded.append(fid)
    for fid, suite in fixtures.suites().items():
        ports.host.put_item(f"SUITE#{GLOBAL}", fid, suite)
        seeded.append(fid)
    return seeded


def seed_host(api_keys: dict[str, str], ports: Ports) -> list[str]:
    """Write the API keys (key -> tenant) hashed, then the fixtures. Returns the seeded fixture ids."""
    for key, tenant in api_keys.items():
        put_api_key(ports, key, tenant)
    return seed_fixtures(ports)
