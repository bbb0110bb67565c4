"""CDK entry point: ``python -m infra.app`` (directly, or as the ``app`` of cdk.json).

Context (``-c key=value`` on either command line): ``stage`` (default ``dev``), ``retentionDays`` (default 30),
``requireAssets`` (``true``: fail instead of synthesizing placeholder assets when ``build/`` is missing), ``seed``
and its companions (infra/constructs/seeding.py), the runtime settings (infra/constructs/runtime_settings.py) and
the rest listed in docs/operations.md. Context the stack cannot honour stops synthesis with one ``error:`` line.
No AWS API calls at synth: the stack is environment-agnostic.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks, ServerlessChecks

from infra.host_stack import DEFAULT_RETENTION_DAYS, HostStack
from infra.packaging import asset_dirs

ROOT = Path(__file__).resolve().parent.parent
CDK_JSON = ROOT / "cdk.json"
DEFAULT_STAGE = "dev"


def stack_id(stage: str) -> str:
    return f"OpenWopHost-{stage}"


def cdk_json_context() -> dict[str, Any]:
    """The context (feature flags) of cdk.json, which only the CDK CLI would otherwise pass to the app."""
    context: dict[str, Any] = json.loads(CDK_JSON.read_text()).get("context", {})
    return context


def build_app(
    context: dict[str, Any] | None = None, *, outdir: str | None = None, nag: bool = True
) -> tuple[App, HostStack]:
    """The App with its one HostStack. ``context`` is merged over cdk.json's when not run by the CDK CLI."""
    if "CDK_CONTEXT_JSON" in os.environ:  # the CLI passes cdk.json context and -c values itself
        app = App(outdir=outdir)
    else:
        app = App(context={**cdk_json_context(), **(context or {})}, outdir=outdir)
    stage = str(app.node.try_get_context("stage") or DEFAULT_STAGE)
    retention_days = int(app.node.try_get_context("retentionDays") or DEFAULT_RETENTION_DAYS)
    require_assets = str(app.node.try_get_context("requireAssets") or "false").lower() == "true"
    stack = HostStack(
        app,
        stack_id(stage),
        stage=stage,
        assets=asset_dirs(require_built=require_assets),
        retention_days=retention_days,
        description=f"OpenWOP v2 serverless host ({stage})",
    )
    if nag:
        # Any unacknowledged AwsSolutions or Serverless finding interrupts synthesis.
        Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))
    return app, stack


def _argv_context(argv: list[str]) -> dict[str, str]:
    context: dict[str, str] = {}
    args = iter(argv)
    for arg in args:
        if arg in ("-c", "--context"):
            key, _, value = next(args, "").partition("=")
            context[key] = value
    return context


def main(argv: list[str] | None = None) -> None:
    outdir = None if "CDK_OUTDIR" in os.environ else str(ROOT / "cdk.out")
    try:
        app, _ = build_app(_argv_context(sys.argv[1:] if argv is None else argv), outdir=outdir)
    except ValueError as exc:  # context it cannot honour (seed in prod, a malformed setting): one line
        raise SystemExit(f"error: {exc}") from None
    app.synth()


if __name__ == "__main__":
    main()
