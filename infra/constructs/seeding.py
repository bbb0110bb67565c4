"""Deploy-time seeding (CDK context ``seed``): a ``Custom::OpenWopSeed`` resource served by the ``seed_host`` function.

Context: ``seed`` (``conformance``, ``demo`` or both, comma-separated; default none), ``seedTenants`` (the tenants the
demo is registered for), ``demoToolsUrl`` and ``demoMcpUrl`` (where the demo's HTTP and MCP tool servers run).
Refused in the ``prod`` stage and checked at synthesis (``shared.services.seed.seed_plan``, the same check the
function and ``openwop-serverless seed`` make). The resource's properties carry a digest of the fixture files, so a
deploy that changes a fixture seeds again; removing ``seed`` deletes the resource and keeps what was seeded.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from aws_cdk import CustomResource
from constructs import Construct

from infra.constructs.functions import HostFunctions
from shared.services.seed import SeedPlan, seed_plan

FIXTURES_DIR = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
RESOURCE_TYPE = "Custom::OpenWopSeed"


def fixtures_digest(root: Path = FIXTURES_DIR) -> str:
    """sha256 over the fixture files' relative paths and bytes (a changed fixture re-seeds on the next deploy)."""
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*.json") if p.is_file()):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def plan_from_context(scope: Construct, stage: str) -> SeedPlan | None:
    """The seed plan the context asks for, or None (no ``seed``). Raises ``SeedPlanError`` when it cannot be done."""
    sets = str(scope.node.try_get_context("seed") or "").strip()
    if not sets or sets.lower() in ("none", "false"):
        return None
    return seed_plan(
        sets,
        tenants=str(scope.node.try_get_context("seedTenants") or ""),
        demo_tools_url=str(scope.node.try_get_context("demoToolsUrl") or ""),
        demo_mcp_url=str(scope.node.try_get_context("demoMcpUrl") or ""),
        stage=stage,
    )


class HostSeeding(Construct):
    """One custom resource; CloudFormation invokes ``seed_host`` on create and update (not on delete)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, stage: str, plan: SeedPlan, functions: HostFunctions
    ) -> None:
        super().__init__(scope, construct_id)
        self.plan = plan
        self.resource = CustomResource(
            self,
            "Seed",
            service_token=functions.function("seed_host").function_arn,
            resource_type=RESOURCE_TYPE,
            properties={
                "Stage": stage,
                "Sets": ",".join(plan.sets),
                "Tenants": ",".join(plan.tenants),
                "DemoToolsUrl": plan.demo_tools_url,
                "DemoMcpUrl": plan.demo_mcp_url,
                "FixturesDigest": fixtures_digest(),
            },
        )
