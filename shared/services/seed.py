"""Seeding: API keys (hashed), the conformance fixtures and the demo. Idempotent: re-seeding changes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shared.ports import Ports
from shared.services import fixtures
from shared.services.auth import put_api_key


def seed_fixtures(ports: Ports) -> list[str]:
    seeded = []
    for fid, doc in fixtures.workflows().items():
        ports.workflows.put_fixture(fid, doc)
        seeded.append(fid)
    for fid, suite in fixtures.suites().items():
        ports.suites.put_fixture(fid, suite)
        seeded.append(fid)
    return seeded


def seed_host(api_keys: dict[str, str], ports: Ports) -> list[str]:
    """Write the API keys (key -> tenant) hashed, then the fixtures. Returns the seeded fixture ids."""
    for key, tenant in api_keys.items():
        put_api_key(ports, key, tenant)
    return seed_fixtures(ports)


# --------------------------------------------------------------------------- seeding a deployed stack

CONFORMANCE = "conformance"
DEMO = "demo"
SEED_SETS = (CONFORMANCE, DEMO)
REFUSED_STAGES = frozenset({"prod"})


class SeedPlanError(ValueError):
    """A seed request that cannot be carried out as asked (one line for the operator)."""


@dataclass(frozen=True)
class SeedPlan:
    """What to seed: ``conformance`` (the host-wide fixtures) and/or ``demo`` (per tenant, tools at the URLs)."""

    sets: tuple[str, ...]
    tenants: tuple[str, ...] = ()
    demo_tools_url: str = ""
    demo_mcp_url: str = ""


def _split(spec: str | Sequence[str]) -> tuple[str, ...]:
    parts = spec.split(",") if isinstance(spec, str) else list(spec)
    return tuple(dict.fromkeys(p.strip() for p in parts if p and p.strip()))


def seed_plan(
    sets: str | Sequence[str],
    *,
    tenants: str | Sequence[str] = (),
    demo_tools_url: str = "",
    demo_mcp_url: str = "",
    stage: str | None = None,
) -> SeedPlan:
    """Check a seed request (from CDK context, the custom resource's properties or the CLI) and return its plan."""
    chosen = _split(sets)
    unknown = [s for s in chosen if s not in SEED_SETS]
    if unknown:
        raise SeedPlanError(f"unknown seed set {', '.join(unknown)} (known: {', '.join(SEED_SETS)})")
    if not chosen:
        raise SeedPlanError(f"nothing to seed: name one or more of {', '.join(SEED_SETS)}")
    if stage is not None and stage in REFUSED_STAGES:
        raise SeedPlanError(f"seeding is refused in the {stage} stage: fixtures and demo tools are for test stages")
    plan = SeedPlan(chosen, _split(tenants), demo_tools_url.strip(), demo_mcp_url.strip())
    if DEMO in chosen and not (plan.tenants and plan.demo_tools_url and plan.demo_mcp_url):
        raise SeedPlanError(
            "the demo needs tenants (seedTenants / --tenants) and the URLs of its tool servers "
            "(demoToolsUrl and demoMcpUrl / --demo-tools-url and --demo-mcp-url)"
        )
    return plan


def seed_stack(ports: Ports, plan: SeedPlan) -> dict[str, Any]:
    """Seed what ``plan`` names; idempotent. Returns what was seeded: ``{"conformance": [ids], "demo": {tenant:
    [ids]}}``. The one seeding path of both the deploy-time custom resource and ``openwop-serverless seed``."""
    from shared.services import demo

    out: dict[str, Any] = {}
    if CONFORMANCE in plan.sets:
        out[CONFORMANCE] = seed_fixtures(ports)
    if DEMO in plan.sets:
        out[DEMO] = {t: demo.seed_demo(ports, t, plan.demo_tools_url, plan.demo_mcp_url) for t in plan.tenants}
    return out
