"""Every documented CDK context option synthesizes, with cdk-nag, in the fewest syntheses that cover them.

The documented options are the rows of docs/operations.md's context table and every ``-c key=`` the docs and the
README show; the options the code reads are its ``try_get_context`` and ``context_flag`` keys, the runtime settings and
the ASL settings. Both sets must be covered here. One synthesis turns every option on at once (a non-prod stage: seeding
and the conformance seams are refused in prod); the default and the prod opt-ins (``alarmEmail`` included) are the
module fixtures of test_host_stack.py, which its cdk-nag test validates; options whose values exclude each other are
synthesized by the test named in ``ALTERNATIVES``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]

# Every option with a value that is not its default (one synthesis; stage qa: seed and conformanceSeams are refused in
# prod, and dev is the stage with the fewest protections).
EVERYTHING: dict[str, str] = {
    "stage": "qa",
    "retentionDays": "14",
    "requireAssets": "false",
    "throttleRate": "50",
    "throttleBurst": "80",
    "corsOrigins": "https://app.example,https://admin.example",
    "tenantWriteRate": "10",
    "tenantWriteBurst": "20",
    "tenantMaxRunsInFlight": "50",
    "tenantMaxHeldRequests": "10",
    "reservedConcurrency": '{"advance_run": 120}',
    "accountConcurrency": "3000",
    "stagesPerAccount": "3",
    "parkedTimeout": "86400",
    "deploymentConfig": "linear",
    "canaryErrorRatePercent": "2.5",
    "canaryMinInvocations": "20",
    "backup": "true",
    "backupRetentionDays": "7",
    "backupCopyVaultArn": "arn:aws:backup:eu-west-2:111122223333:backup-vault:openwop-dr",
    "restoreRegion": "eu-west-2",
    "signingKeyArn": "arn:aws:kms:eu-west-2:111122223333:key/mrk-0123456789abcdef0123456789abcdef",
    "evalMaxConcurrency": "2",
    "runStartsPerMinute": "30",
    "metricsNamespace": "OpenWOP/qa-matrix",
    "alarmEmail": "oncall@example.com",
    "detailedAlarms": "true",
    "dashboard": "true",
    "egressAllow": "10.1.0.0/16",
    "httpAllowlist": "api.example.com",
    "runToolCallBudget": "50",
    "sessionTtlSeconds": "600",
    "toolResponseMaxBytes": "65536",
    "conformance": "false",
    "conformanceSeams": "true",
    "maxPollWaitSeconds": "10",
    "apiKeyPepperMaxAgeSeconds": "300",
    "hostName": "acme-host",
    "buildId": "abc123",
    "modelProviders": "bedrock,openai",
    "modelPrices": '{"m": {"input": 1, "output": 2}}',
    "openaiBaseUrl": "https://llm.example.com/v1",
    "modelCallAttempts": "2",
    "judgeProvider": "bedrock",
    "judgeModel": "judge-model",
    "executionMaxTasks": "500",
    "evalFinishPageTrials": "400",
    "evalTrialsPerBatch": "10",
    "webhookRetryBaseSeconds": "5",
    "webhookRetryCapSeconds": "60",
    "webhookRotationOverlapSeconds": "3600",
    "webhookDeadLetterDays": "7",
    "startSweepGraceSeconds": "90",
    "webhookSubscriptionCacheSeconds": "5",
    "tracingEndpoint": "http://localhost:4318/v1/traces",
    "tracingCaptureContent": "true",
    "tracingLayerArn": "arn:aws:lambda:us-east-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1",
    "seed": "conformance,demo",
    "seedTenants": "acme",
    "demoToolsUrl": "https://tools.example.com",
    "demoMcpUrl": "https://mcp.example.com/mcp",
}

# Values that exclude the ones above, and the test that synthesizes each (cdk-nag findings do not depend on them:
# they change a property's value, never which resources exist).
ALTERNATIVES: dict[str, str] = {
    "reservedConcurrency=off": "test_deployable.py::test_reservations_and_parked_timeout_come_from_context",
    "deploymentConfig=allAtOnce (stage dev)": "test_deployable.py::test_deploys_shift_a_canary_and_roll_back_on_their_own_errors",
    "corsOrigins= (no CORS)": "test_host_stack.py::test_cors_origins_come_from_context_and_an_empty_list_turns_cors_off",
    "restoreRegion without signingKeyArn (a multi-region key)": "test_host_stack.py::test_cdk_nag_reports_no_error",
}


def documented_options() -> set[str]:
    """The first-column keys of docs/operations.md's context table, and every ``-c key=`` of the docs and README."""
    text = (ROOT / "docs" / "operations.md").read_text()
    table = text[text.index("| Context | Default | Effect |") :]
    table = table[: table.index("\n\n")]
    keys = {k for row in table.splitlines()[2:] for k in re.findall(r"`([A-Za-z]+)`", row.split("|")[1])}
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        keys |= set(re.findall(r"-c ([A-Za-z]+)=", path.read_text()))
    return keys - {"k", "key"}  # the placeholders of "-c key=value"


def code_options() -> set[str]:
    """The context keys the CDK app reads (by name: ``try_get_context``, ``context_flag``, ``_positive``; and the
    settings tables)."""
    from infra.constructs.runtime_settings import RUNTIME_SETTINGS
    from shared import manifest

    source = "\n".join(p.read_text() for p in (ROOT / "infra").rglob("*.py"))
    keys = set(re.findall(r'try_get_context\("([A-Za-z]+)"\)', source))
    keys |= set(re.findall(r'context_flag\([a-z_]+, "([A-Za-z]+)"\)', source))
    keys |= set(re.findall(r'_positive\([a-z_]+, "([A-Za-z]+)"', source))  # infra/constructs/concurrency.py
    return keys | {s.context for s in RUNTIME_SETTINGS} | set(manifest.ASL_SETTINGS)


def test_every_documented_and_every_read_option_is_in_the_matrix() -> None:
    # Given the options the docs name and the options the app reads
    documented, read = documented_options(), code_options()
    # Then the docs name every option the app reads, and the matrix synthesizes every one of them
    assert read - documented == set()
    assert documented - set(EVERYTHING) == set()
    assert {"alarmEmail", "detailedAlarms", "dashboard", "backup", "seed"} <= documented


def test_everything_on_at_once_synthesizes_clean_under_cdk_nag(tmp_path: Path) -> None:
    import cdk_nag

    from infra.app import build_app
    from tests.infra.templates import logical_id, synthesize

    # Given the app with every documented option on at once, cdk-nag attached as `make synth` runs it
    started = time.monotonic()
    _, stack = build_app(dict(EVERYTHING), outdir=str(tmp_path), nag=True)
    templates = synthesize(stack)  # synthesis runs the nag packs: an unacknowledged finding fails it
    # Then neither pack reports a finding left unacknowledged
    for pack in (cdk_nag.AwsSolutionsChecks(), cdk_nag.ServerlessChecks()):
        report = pack.validate_scope(stack)
        assert [f"{v.rule_name}: {[r.construct_path for r in v.violating_resources]}" for v in report.violations] == []
    # and the options reached the template: the email subscription has a dead-letter queue, the backup plan exists,
    # every function carries the collector layer
    resources: dict[str, Any] = templates.flat["Resources"]
    (subscription,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::SNS::Subscription"]
    assert subscription["Protocol"] == "email" and subscription["Endpoint"] == EVERYTHING["alarmEmail"]
    assert "deadLetterTargetArn" in subscription["RedrivePolicy"]
    assert [r for r in resources.values() if r["Type"] == "AWS::Backup::BackupPlan"]
    functions = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::Function"]
    assert functions and all(EVERYTHING["tracingLayerArn"] in f["Layers"] for f in functions)
    # and every function's canary alarm rolls back above 2.5% of at least 20 invocations a minute
    canary = [resources[logical_id(a)]["Properties"] for a in stack.deployments.canary_alarms.values()]
    assert len(canary) == len(functions)
    for alarm in canary:
        (expression,) = [m["Expression"] for m in alarm["Metrics"] if "Expression" in m]
        assert alarm["Threshold"] == 2.5
        assert expression == "IF(invocations >= 20, 100 * FILL(errors, 0) / invocations, 0)"
    print(f"everything-on synthesis with cdk-nag: {time.monotonic() - started:.1f} s")
