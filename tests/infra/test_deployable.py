"""The synthesized prod template is deployable today and safe to deploy again: every function on a supported
runtime (python3.13, arm64), published as a version behind the ``live`` alias that CodeDeploy shifts with a canary
and rolls back on alarms; reserved concurrency on the run tasks and long polls; alarms on DynamoDB throttles and
the webhooks' lag and queue age; a parked timeout, a backup plan and limits from context."""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from shared import manifest
from shared.manifest import routes
from tests.infra.templates import logical_id, synthesize

pytestmark = pytest.mark.infra


def _synth(tmp_path: Path, **context: Any) -> tuple[Any, dict[str, dict[str, Any]]]:
    from infra.app import build_app

    _, stack = build_app({"stage": "prod", **context}, outdir=str(tmp_path), nag=False)
    return stack, synthesize(stack).to_json()["Resources"]


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, dict[str, Any]]]:
    return _synth(tmp_path_factory.mktemp("cdk.out"))


def _of_type(resources: dict[str, dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in resources.items() if r["Type"] == kind}


def _id(stack: Any, construct: Any) -> str:
    """The construct's logical id, in whichever stack (root or nested) holds it: ids are unique across them."""
    return logical_id(construct)


# --- Runtime --------------------------------------------------------------------------------------------------


def test_no_function_runs_on_a_runtime_past_its_deprecation_date(prod) -> None:
    from infra.runtimes import RUNTIMES, past_deprecation

    _stack, resources = prod
    runtimes = {r["Properties"]["Runtime"] for r in _of_type(resources, "AWS::Lambda::Function").values()}
    layers = {
        rt
        for r in _of_type(resources, "AWS::Lambda::LayerVersion").values()
        for rt in r["Properties"]["CompatibleRuntimes"]
    }
    # Then every function and the layer are on python3.13, which Lambda supports today
    assert runtimes == layers == {"python3.13"}
    assert [rt for rt in runtimes if past_deprecation(rt, date.today())] == []
    # and the check can fail: python3.11 (what the stack ran) is past its date today, as is a runtime not in the table
    assert past_deprecation("python3.11", date(2026, 12, 3)) and past_deprecation("python3.9", date.today())
    assert RUNTIMES["python3.11"].updates_blocked == date(2026, 8, 31)


def test_every_function_is_arm64_and_versioned_behind_a_live_alias_codedeploy_shifts(prod) -> None:
    stack, resources = prod
    functions = _of_type(resources, "AWS::Lambda::Function")
    versions = _of_type(resources, "AWS::Lambda::Version")
    aliases = _of_type(resources, "AWS::Lambda::Alias")
    groups = _of_type(resources, "AWS::CodeDeploy::DeploymentGroup")
    assert len(functions) == len(versions) == len(aliases) == len(groups) == len(manifest.FUNCTIONS)
    for spec in manifest.FUNCTIONS:
        fn_id = _id(stack, stack.functions.function(spec.name))
        alias_id = _id(stack, stack.functions.alias(spec.name))
        # Given a function: arm64
        assert functions[fn_id]["Properties"]["Architectures"] == ["arm64"]
        # Then a version of it is published, and the alias "live" points at that version
        alias = aliases[alias_id]
        version_id = alias["Properties"]["FunctionVersion"]["Fn::GetAtt"][0]
        assert versions[version_id]["Properties"]["FunctionName"] == {"Ref": fn_id}
        assert alias["Properties"]["Name"] == "live" and alias["Properties"]["FunctionName"] == {"Ref": fn_id}
        # and CloudFormation hands the alias update to CodeDeploy (the deployment group of this function)
        update = alias["UpdatePolicy"]["CodeDeployLambdaAliasUpdate"]
        group_id = update["DeploymentGroupName"]["Ref"]
        assert group_id in groups and update["ApplicationName"] == groups[group_id]["Properties"]["ApplicationName"]


def test_nothing_invokes_latest_every_caller_names_the_alias(prod) -> None:
    stack, resources = prod
    fn_ids = {_id(stack, f) for f in stack.functions.functions.values()}
    # Given everything that invokes a function: API integrations, event source mappings, state machine substitutions
    callers = [
        r["Properties"]["IntegrationUri"] for r in _of_type(resources, "AWS::ApiGatewayV2::Integration").values()
    ]
    callers += [
        r["Properties"]["FunctionName"] for r in _of_type(resources, "AWS::Lambda::EventSourceMapping").values()
    ]
    callers += [
        v
        for r in _of_type(resources, "AWS::StepFunctions::StateMachine").values()
        for k, v in r["Properties"]["DefinitionSubstitutions"].items()
        if k.endswith("Function")
    ]
    # Then each names an alias: its ARN, or "<function name or ARN>:live" (event sources; the state machines, whose
    # reference to the alias resource closed a cycle through the rollback alarms of decision 0100), never a bare
    # function (whose unqualified ARN is $LATEST)
    # (one API integration per function that serves routes, shared by its routes)
    assert len(callers) == len({r.function for r in routes.ROUTES}) + 3 + sum(
        len(m.invokes) for m in manifest.STATE_MACHINES
    )
    for value in callers:
        assert _names_live_alias(value, resources), value
    # and the state machines may invoke the aliases only
    invokable = [
        res
        for p in _of_type(resources, "AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "lambda:InvokeFunction" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
        for res in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    ]
    assert len(invokable) == sum(len(m.invokes) for m in manifest.STATE_MACHINES)
    assert all(_names_live_alias(r, resources) for r in invokable)
    assert fn_ids  # (the functions' own ids appear only inside a ":live" join)


def _names_live_alias(value: Any, resources: dict[str, dict[str, Any]]) -> bool:
    if set(value) == {"Ref"}:
        return resources[value["Ref"]]["Type"] == "AWS::Lambda::Alias"
    parts = value.get("Fn::Join", ["", []])[1]
    named = re.findall(r'"(?:Ref|Fn::GetAtt)": \[?"([A-Za-z0-9]+)"', json.dumps(parts))
    return (
        bool(parts)
        and parts[-1] == ":live"
        and len(named) == 1
        and resources[named[0]]["Type"] in ("AWS::Lambda::Function", "AWS::Lambda::Alias")
    )


def test_deploys_shift_a_canary_and_roll_back_on_their_own_errors(prod, tmp_path: Path) -> None:
    stack, resources = prod
    alarms = _of_type(resources, "AWS::CloudWatch::Alarm")
    aliases = _of_type(resources, "AWS::Lambda::Alias")
    groups = _of_type(resources, "AWS::CodeDeploy::DeploymentGroup")
    paging = {_id(stack, a) for a in stack.monitoring.alarms.values()}
    assert {
        _id(stack, stack.monitoring.alarms["Api5xx"]),
        _id(stack, stack.monitoring.alarms["RunExecutionsFailed"]),
    } <= paging
    assert set(stack.deployments.canary_alarms) == {f.name for f in manifest.FUNCTIONS} == set(stack.deployments.groups)
    for spec in manifest.FUNCTIONS:
        group_id = _id(stack, stack.deployments.groups[spec.name])
        props = groups[group_id]["Properties"]
        # Given a function's deployment group, the alias that names it and the version that alias points at
        alias = aliases[_id(stack, stack.functions.alias(spec.name))]
        assert alias["UpdatePolicy"]["CodeDeployLambdaAliasUpdate"]["DeploymentGroupName"] == {"Ref": group_id}
        version_id = alias["Properties"]["FunctionVersion"]["Fn::GetAtt"][0]
        fn_ref = alias["Properties"]["FunctionName"]
        # Then outside dev each deploy is a canary: 10% for 5 minutes, then all
        assert props["DeploymentConfigName"] == "CodeDeployDefault.LambdaCanary10Percent5Minutes", spec.name
        # and it rolls back on one alarm only, the function's own canary alarm, or when the deployment fails or is
        # stopped; never on a stack-wide alarm (Api5xx, <Machine>ExecutionsFailed: they page)
        assert props["AlarmConfiguration"]["Enabled"] is True
        (named,) = [a["Name"]["Ref"] for a in props["AlarmConfiguration"]["Alarms"]]
        assert named == _id(stack, stack.deployments.canary_alarms[spec.name]) and named not in paging
        assert set(props["AutoRollbackConfiguration"]["Events"]) == {
            "DEPLOYMENT_FAILURE",
            "DEPLOYMENT_STOP_ON_REQUEST",
            "DEPLOYMENT_STOP_ON_ALARM",
        }
        # and that alarm is the error rate of the version this deploy publishes, invoked through the live alias:
        # Errors / Invocations with FunctionName, Resource <function>:live and ExecutedVersion <that version>
        alarm = alarms[named]["Properties"]
        stats = {m["Id"]: m["MetricStat"] for m in alarm["Metrics"] if "MetricStat" in m}
        assert {i: st["Metric"]["MetricName"] for i, st in stats.items()} == {
            "errors": "Errors",
            "invocations": "Invocations",
        }
        for st in stats.values():
            assert (st["Metric"]["Namespace"], st["Stat"], st["Period"]) == ("AWS/Lambda", "Sum", 60)
            assert {d["Name"]: d["Value"] for d in st["Metric"]["Dimensions"]} == {
                "FunctionName": fn_ref,
                "Resource": {"Fn::Join": ["", [fn_ref, ":live"]]},
                "ExecutedVersion": {"Fn::GetAtt": [version_id, "Version"]},
            }, spec.name
        (expression,) = [m for m in alarm["Metrics"] if "Expression" in m]
        assert expression["Expression"] == "IF(invocations >= 5, 100 * FILL(errors, 0) / invocations, 0)"
        assert expression["ReturnData"] is True
        # above 5% in one minute (the defaults of canaryErrorRatePercent and canaryMinInvocations), no data not
        # breaching, and no action: CodeDeploy reads it, nobody is paged by it
        assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["EvaluationPeriods"]) == (
            5,
            "GreaterThanThreshold",
            1,
        )
        assert alarm["TreatMissingData"] == "notBreaching" and "AlarmActions" not in alarm
        # and it lives in the same template as its group and alias (no cross-stack reference)
        assert stack.deployments.canary_alarms[spec.name].stack is stack.deployments.groups[spec.name].stack
    # and one service role serves them all
    assert len({g["Properties"]["ServiceRoleArn"]["Fn::GetAtt"][0] for g in groups.values()}) == 1
    # and the runbook says what the canary alarms are
    runbook = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    assert "| `<Function>CanaryErrors` |" in runbook
    # and dev deploys at once, with no canary alarm (a shift of no minutes would never consult it), linear and a typo
    # come from context
    for context, expected, alarmed in (
        ({"stage": "dev"}, "CodeDeployDefault.LambdaAllAtOnce", False),
        ({"deploymentConfig": "linear"}, "CodeDeployDefault.LambdaLinear10PercentEvery1Minute", True),
    ):
        other_stack, other = _synth(tmp_path / str(len(expected)), **context)
        other_groups = _of_type(other, "AWS::CodeDeploy::DeploymentGroup").values()
        assert {g["Properties"]["DeploymentConfigName"] for g in other_groups} == {expected}
        assert bool(other_stack.deployments.canary_alarms) is alarmed
        canaries = {_id(other_stack, a) for a in other_stack.deployments.canary_alarms.values()}
        assert canaries <= set(_of_type(other, "AWS::CloudWatch::Alarm"))
        for g in other_groups:
            named = [a["Name"]["Ref"] for a in g["Properties"].get("AlarmConfiguration", {}).get("Alarms", [])]
            assert len(named) == int(alarmed) and set(named) <= canaries
            stop_on_alarm = "DEPLOYMENT_STOP_ON_ALARM" in g["Properties"]["AutoRollbackConfiguration"]["Events"]
            assert stop_on_alarm is alarmed


def test_every_function_records_one_build_id(prod, tmp_path: Path) -> None:
    stack, resources = prod
    ids = {
        r["Properties"]["Environment"]["Variables"]["BUILD_ID"]
        for r in _of_type(resources, "AWS::Lambda::Function").values()
    }
    # Then every function names the same build: by default the code asset's content hash
    assert ids == {stack.functions.build_id} and len(stack.functions.build_id) == 12


# --- Isolation --------------------------------------------------------------------------------------------------


def test_run_tasks_and_long_polls_have_reserved_concurrency_within_the_account(prod) -> None:
    from infra.constructs.concurrency import DEFAULT_RESERVED, LONG_POLLS, PUBLIC_URLS, TASKS, UNRESERVED_MINIMUM

    stack, resources = prod
    reserved = {
        spec.name: resources[_id(stack, stack.functions.function(spec.name))]["Properties"].get(
            "ReservedConcurrentExecutions"
        )
        for spec in manifest.FUNCTIONS
    }
    # Then the run-advancing tasks have a floor and the long polls and the public function URL (the agent gateway's)
    # a ceiling, and nothing else is reserved
    assert {k: v for k, v in reserved.items() if v is not None} == dict(DEFAULT_RESERVED)
    assert set(TASKS) | set(LONG_POLLS) | set(PUBLIC_URLS) == set(DEFAULT_RESERVED)
    assert set(PUBLIC_URLS) == {spec.name for spec in manifest.FUNCTIONS if spec.url}
    assert all(reserved[name] >= 10 for name in (*TASKS, *LONG_POLLS, *PUBLIC_URLS))
    # and the account's default 1,000 keeps Lambda's 100 unreserved, with two stages deployed to it (issue 37, item 8)
    assert sum(DEFAULT_RESERVED.values()) <= 1000 - UNRESERVED_MINIMUM
    assert 2 * sum(DEFAULT_RESERVED.values()) <= 1000 - UNRESERVED_MINIMUM
    assert sum(v for v in reserved.values() if v is not None) <= 400


@pytest.mark.parametrize(
    ("context", "message"),
    [
        (
            {"reservedConcurrency": '{"advance_run": 950}'},
            "context reservedConcurrency: 1230 reserved executions per stage, assuming 2 stages in an account of 1000",
        ),
        (
            {"stagesPerAccount": "3"},
            "context reservedConcurrency: 400 reserved executions per stage, assuming 3 stages in an account of 1000 "
            "(stagesPerAccount, accountConcurrency), leave -200 unreserved where Lambda keeps at least 100",
        ),
        ({"stagesPerAccount": "0"}, "context stagesPerAccount='0': expected a positive integer"),
        ({"accountConcurrency": "many"}, "context accountConcurrency='many': expected a positive integer"),
        ({"reservedConcurrency": '{"nope": 3}'}, "context reservedConcurrency="),
        ({"reservedConcurrency": "lots"}, "context reservedConcurrency="),
        ({"parkedTimeout": "30"}, "context parkedTimeout='30': expected 60 to 2592000"),
        ({"parkedTimeout": "a week"}, "context parkedTimeout='a week': expected whole seconds"),
        ({"maxPollWaitSeconds": "29"}, "context maxPollWaitSeconds=29: at most 25"),
        ({"deploymentConfig": "blue-green"}, "context deploymentConfig='blue-green': expected one of"),
        ({"backup": "true", "backupRetentionDays": "0"}, "context backupRetentionDays='0'"),
        ({"restoreRegion": "Frankfurt"}, "context restoreRegion='Frankfurt': expected a region name"),
        ({"signingKeyArn": "mrk-1234"}, "context signingKeyArn='mrk-1234': expected a KMS key ARN"),
    ],
)
def test_deploy_context_that_cannot_work_stops_synthesis(tmp_path: Path, context: dict[str, str], message: str) -> None:
    from infra.app import build_app

    with pytest.raises(ValueError) as exc:
        build_app({"stage": "prod", **context}, outdir=str(tmp_path), nag=False)
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


def test_reservations_and_parked_timeout_come_from_context(tmp_path: Path) -> None:
    stack, resources = _synth(
        tmp_path,
        reservedConcurrency='{"advance_run": 400, "stream_run_events": 0}',
        stagesPerAccount="1",  # 600 reserved: one stage to the account
        parkedTimeout="86400",
        tenantWriteRate="3",
        tenantWriteBurst="6",
    )
    fn = {
        spec.name: resources[_id(stack, stack.functions.function(spec.name))]["Properties"]
        for spec in manifest.FUNCTIONS
    }
    assert fn["advance_run"]["ReservedConcurrentExecutions"] == 400
    assert "ReservedConcurrentExecutions" not in fn["stream_run_events"]
    assert fn["create_run"]["Environment"]["Variables"]["TENANT_WRITE_RATE"] == "3"
    assert fn["manage_tools"]["Environment"]["Variables"]["TENANT_WRITE_BURST"] == "6"
    for machine in _of_type(resources, "AWS::StepFunctions::StateMachine").values():
        subs = machine["Properties"]["DefinitionSubstitutions"]
        if "ParkedTimeoutSeconds" in subs:
            assert subs["ParkedTimeoutSeconds"] == "86400"
    # and reservedConcurrency=off reserves nothing (an account with a small quota)
    stack, resources = _synth(tmp_path / "off", reservedConcurrency="off")
    assert not any(
        "ReservedConcurrentExecutions" in r["Properties"] for r in _of_type(resources, "AWS::Lambda::Function").values()
    )


# --- Alarms and backups -----------------------------------------------------------------------------------------


def test_alarms_watch_dynamodb_throttles_the_fanouts_lag_and_the_webhook_queues_age(prod) -> None:
    from infra.constructs.common import pascal

    stack, resources = prod
    alarms = _of_type(resources, "AWS::CloudWatch::Alarm")
    mon = stack.monitoring.alarms
    # Given the DynamoDB throttle alarm: read and write throttle events of every table, summed
    throttles = alarms[_id(stack, mon["DynamoDbThrottles"])]["Properties"]
    stats = [m["MetricStat"]["Metric"] for m in throttles["Metrics"] if "MetricStat" in m]
    watched = {(m["MetricName"], json.dumps(m["Dimensions"][0]["Value"])) for m in stats}
    tables = {
        json.dumps(stack.resolve(t.table_name))
        for k, t in stack.tables.tables.items()
        if manifest.table(k).throttle_alarm
    }
    # (at most 10 metrics per math alarm: the signing table is left out)
    assert {t.key for t in manifest.TABLES if not t.throttle_alarm} == {manifest.SIGNING}
    assert watched == {(f"{k}ThrottleEvents", t) for k in ("Read", "Write") for t in tables}
    assert {m["Namespace"] for m in stats} == {"AWS/DynamoDB"} and throttles["Threshold"] == 1
    # and the fan-out's stream lag (iterator age over 5 minutes)
    lag = alarms[_id(stack, mon["WebhookFanoutLag"])]["Properties"]
    assert (lag["Namespace"], lag["MetricName"], lag["Statistic"], lag["Threshold"]) == (
        "AWS/Lambda",
        "IteratorAge",
        "Maximum",
        300_000,
    )
    assert lag["Dimensions"] == [
        {"Name": "FunctionName", "Value": {"Ref": _id(stack, stack.functions.function("fanout_webhooks"))}}
    ]
    # and the webhook queue's oldest message (over 15 minutes)
    age = alarms[_id(stack, mon["WebhooksQueueAge"])]["Properties"]
    assert (age["Namespace"], age["MetricName"], age["Threshold"]) == ("AWS/SQS", "ApproximateAgeOfOldestMessage", 900)
    queue = stack.queues.queues[manifest.WEBHOOKS]
    assert age["Dimensions"] == [{"Name": "QueueName", "Value": stack.resolve(queue.queue_name)}]
    # and each has a runbook row in docs/operations.md
    runbook = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    families = ("ExecutionsFailed", "ExecutionsThrottled")  # a row per family: <Machine>ExecutionsFailed ...
    tasks = {f"{pascal(f.name)}Throttles" for f in manifest.FUNCTIONS if f.kind == "task"}
    for name in [*mon, *stack.monitoring.rules]:  # every default alarm and rule: by its name, or its family's row
        family = next((f for f in families if name.endswith(f)), None)
        row = f"<Machine>{family}" if family else "<Task>Throttles" if name in tasks else name
        assert f"| `{row}` |" in runbook, name


def test_a_backup_plan_only_when_asked_covering_every_table(prod, tmp_path: Path) -> None:
    _stack, resources = prod
    assert not _of_type(resources, "AWS::Backup::BackupPlan") and not _of_type(resources, "AWS::Backup::BackupVault")
    # Given backup=true with a copy vault elsewhere
    copy = "arn:aws:backup:eu-west-2:111122223333:backup-vault:openwop-dr"
    stack, resources = _synth(tmp_path, backup="true", backupCopyVaultArn=copy, backupRetentionDays="14")
    (plan,) = _of_type(resources, "AWS::Backup::BackupPlan").values()
    (rule,) = plan["Properties"]["BackupPlan"]["BackupPlanRule"]
    # Then a daily rule keeps backups 14 days and copies each to the other vault
    assert rule["ScheduleExpression"] == "cron(0 3 * * ? *)" and rule["Lifecycle"]["DeleteAfterDays"] == 14
    assert rule["CopyActions"] == [{"DestinationBackupVaultArn": copy, "Lifecycle": {"DeleteAfterDays": 14}}]
    # and the selection names every table of the stack, nothing else
    (selection,) = _of_type(resources, "AWS::Backup::BackupSelection").values()
    chosen = {json.dumps(r) for r in selection["Properties"]["BackupSelection"]["Resources"]}
    assert chosen == {json.dumps(stack.resolve(t.table_arn)) for t in stack.tables.tables.values()}
    (vault,) = _of_type(resources, "AWS::Backup::BackupVault").values()
    assert vault["DeletionPolicy"] == "Retain"
    # and a backup job of that vault, or a copy job out of it, that failed goes to the alarm topic (issue 37, item 10)
    rules = {k: r["Properties"] for k, r in _of_type(resources, "AWS::Events::Rule").items()}
    failed = rules[_id(stack, stack.backups.failed_jobs)]
    vault_id = _id(stack, stack.backups.vault)
    assert failed["EventPattern"] == {
        "source": ["aws.backup"],
        "detail-type": ["Backup Job State Change", "Copy Job State Change"],
        "detail": {
            "state": ["FAILED", "ABORTED", "EXPIRED"],
            "$or": [
                {"backupVaultName": [{"Fn::GetAtt": [vault_id, "BackupVaultName"]}]},
                {"sourceBackupVaultArn": [{"Fn::GetAtt": [vault_id, "BackupVaultArn"]}]},
            ],
        },
    }
    (target,) = failed["Targets"]
    assert target["Arn"] == {"Ref": _id(stack, stack.monitoring.topic)}
    assert failed["State"] == "ENABLED"
    # and the rule is only there with the plan, and has its runbook row
    assert not [r for r in _of_type(prod[1], "AWS::Events::Rule").values() if "aws.backup" in json.dumps(r)]
    runbook = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    assert "| `BackupJobsFailed` (`backup`) |" in runbook


# --- A restore elsewhere ----------------------------------------------------------------------------------------

RESTORE_REGION = "eu-west-2"


def test_restore_region_makes_the_signing_key_multi_region_and_replicates_pepper_and_tombstone(
    prod, tmp_path: Path
) -> None:
    from infra.constructs.secrets import REPLICATED

    # Given the default prod stack: a single-region key, no replica of any secret
    stack, resources = prod
    (key,) = _of_type(resources, "AWS::KMS::Key").values()
    assert "MultiRegion" not in key["Properties"]
    assert all(
        "ReplicaRegions" not in s["Properties"] for s in _of_type(resources, "AWS::SecretsManager::Secret").values()
    )
    # When restoreRegion names another region
    stack, resources = _synth(tmp_path, restoreRegion=RESTORE_REGION)
    # Then the signing key is multi-region (and still rotated and retained)
    (key,) = _of_type(resources, "AWS::KMS::Key").values()
    assert key["Properties"]["MultiRegion"] is True and key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == key["UpdateReplacePolicy"] == "Retain"
    # and the pepper and tombstone secrets are replicated there, the cursor secret not (a new one restarts listings)
    secrets = _of_type(resources, "AWS::SecretsManager::Secret")
    assert set(REPLICATED) == {manifest.APIKEY_PEPPER, manifest.TOMBSTONE}
    for spec in manifest.SECRETS:
        props = secrets[_id(stack, stack.secrets.secret(spec.key))]["Properties"]
        wanted = [{"Region": RESTORE_REGION}] if spec.key in REPLICATED else None
        assert props.get("ReplicaRegions") == wanted, spec.key


def test_a_restore_stack_uses_the_replica_signing_key_it_is_given(tmp_path: Path) -> None:
    # Given a stack deployed by a restore in the restore region, named the replica of the lost stack's signing key
    replica = f"arn:aws:kms:{RESTORE_REGION}:111122223333:key/mrk-0123456789abcdef0123456789abcdef"
    stack, resources = _synth(tmp_path, signingKeyArn=replica)
    # Then it creates no key of its own
    assert not _of_type(resources, "AWS::KMS::Key")
    # and every function that seals or opens webhook secrets names the replica, in its environment and its grants
    users = [f for f in manifest.FUNCTIONS if any(k == manifest.SIGNING for k, _ in f.keys)]
    assert {f.name for f in users} >= {"manage_webhooks", "deliver_webhooks"}
    for spec in users:
        fn = resources[_id(stack, stack.functions.function(spec.name))]["Properties"]
        assert fn["Environment"]["Variables"][manifest.kms_key(manifest.SIGNING).env_var] == replica
        role = fn["Role"]["Fn::GetAtt"][0]
        statements = [
            st
            for p in _of_type(resources, "AWS::IAM::Policy").values()
            if {"Ref": role} in p["Properties"]["Roles"]
            for st in p["Properties"]["PolicyDocument"]["Statement"]
            if any(
                str(a).startswith("kms:") for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]])
            )
        ]
        assert statements and all(st["Resource"] == replica for st in statements), spec.name
