"""CloudFormation custom resource ``Custom::OpenWopSeed``: seed the conformance fixtures and/or the demo on deploy
(CDK context ``seed``); the same service as ``openwop-serverless seed``. See shared.services.seed.seed_stack."""

from __future__ import annotations

from typing import Any

from functions._common.custom_resource import Refused, respond
from functions._common.observability import observed
from shared.errors import ProtocolError
from shared.services import seed
from shared.wiring import get_ports


def _seed(props: dict[str, Any]) -> dict[str, Any]:
    try:
        plan = seed.seed_plan(
            str(props.get("Sets", "")),
            tenants=str(props.get("Tenants", "")),
            demo_tools_url=str(props.get("DemoToolsUrl", "")),
            demo_mcp_url=str(props.get("DemoMcpUrl", "")),
            stage=str(props.get("Stage", "")),
        )
        out = seed.seed_stack(get_ports(), plan)
    except seed.SeedPlanError as exc:
        raise Refused(str(exc)) from None
    except ProtocolError as exc:  # e.g. the demo MCP server could not be listed
        raise Refused(f"{exc.code}: {exc.message}") from None
    return {"Conformance": len(out.get(seed.CONFORMANCE, [])), "DemoTenants": len(out.get(seed.DEMO, {}))}


@observed("RequestId")
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return respond(event, context, _seed)
