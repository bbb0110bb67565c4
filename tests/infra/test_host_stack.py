"""Infra tier: the synthesized HostStack matches the resource manifest (shared/manifest/) and passes cdk-nag.

One default synthesis per module (fixture ``synth``) that most tests read, one with the monitoring opt-ins
(``synth_opted_in``). No Docker, no AWS calls.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from shared import manifest
from shared.manifest import routes
from tests.infra.templates import Templates, synthesize

if TYPE_CHECKING:
    from infra.host_stack import HostStack

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]
# A non-dev stage, so the template under test is the one with RETAIN policies and deletion protection.
STAGE = "prod"
RETENTION_DAYS = 30
DYNAMODB_WRITE_ACTIONS = {
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:TransactWriteItems",
}


@dataclass(frozen=True)
class Synth:
    stack: HostStack
    template: Templates  # the root stack with its nested stacks folded in (tests/infra/templates.py)
    resources: dict[str, dict[str, Any]] = field(repr=False)

    def of_type(self, cfn_type: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.resources.items() if r["Type"] == cfn_type}

    def resolve(self, value: Any) -> Any:
        """A token as the (folded) template spells it: ``{"Ref": ...}``, ``{"Fn::GetAtt": [...]}`` ..."""
        return self.template.resolve(self.stack, value)

    def logical_id(self, construct: Any) -> str:
        return str(self.resolve(construct.node.default_child.ref)["Ref"])

    def function_logical_id(self, name: str) -> str:
        return self.logical_id(self.stack.functions.function(name))

    def alias_logical_id(self, name: str) -> str:
        """The function's ``live`` alias: what every route, state machine and event source invokes."""
        return self.logical_id(self.stack.functions.alias(name))

    def names_alias(self, value: Any, name: str) -> bool:
        """``value`` (a FunctionName: the alias ARN, or ``<function name>:live`` built from it) names the alias."""
        return json.dumps({"Ref": self.alias_logical_id(name)}) in json.dumps(value)

    def role_statements(self, role_logical_id: str) -> list[dict[str, Any]]:
        """Every statement of every AWS::IAM::Policy attached to the role."""
        statements: list[dict[str, Any]] = []
        for policy in self.of_type("AWS::IAM::Policy").values():
            if {"Ref": role_logical_id} in policy["Properties"].get("Roles", []):
                statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
        return statements

    def function_statements(self, name: str) -> list[dict[str, Any]]:
        fn = self.resources[self.function_logical_id(name)]
        return self.role_statements(fn["Properties"]["Role"]["Fn::GetAtt"][0])


def _synthesize(outdir: Path, **context: Any) -> Synth:
    from infra.app import build_app

    _, stack = build_app(
        {"stage": STAGE, "retentionDays": str(RETENTION_DAYS), **context}, outdir=str(outdir), nag=False
    )
    template = synthesize(stack)
    return Synth(stack=stack, template=template, resources=template.flat["Resources"])


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The module's one synthesis (a few seconds): cdk.json feature flags, stage ``prod``, cdk-nag not attached."""
    return _synthesize(tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="module")
def synth_opted_in(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The same with the operator's opt-ins: ``detailedAlarms`` as the CDK CLI passes ``-c`` values (a string),
    ``dashboard`` as cdk.json would hold it (JSON true), the backup plan with a copy to a vault elsewhere, and the
    alarm e-mail (which cdk-nag refused before it had a dead-letter queue: issue 37, item 9), and a restore region
    (a multi-region signing key, the pepper and tombstone secrets replicated)."""
    return _synthesize(
        tmp_path_factory.mktemp("cdk.out"),
        alarmEmail="oncall@example.com",
        detailedAlarms="true",
        dashboard=True,
        backup="true",
        backupCopyVaultArn="arn:aws:backup:eu-west-2:111122223333:backup-vault:openwop-dr",
        restoreRegion="eu-west-2",
    )


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _actions(statements: list[dict[str, Any]]) -> set[str]:
    return {a for s in statements for a in _as_list(s["Action"])}


def _statements_with(statements: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [s for s in statements if action in _as_list(s["Action"])]


# --- API routes -------------------------------------------------------------------------------------------------


def test_the_stack_keeps_clear_of_cloudformations_500_resources(synth: Synth, synth_opted_in: Synth) -> None:
    # Given the functions that serve routes
    served = {r.function for r in routes.ROUTES}
    # Then each has one API integration and one invoke permission for the API, whatever number of routes it serves
    assert len(synth.of_type("AWS::ApiGatewayV2::Integration")) == len(served)
    api_permissions = [
        p
        for p in synth.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    ]
    assert len(api_permissions) == len(served)
    # and the root stack and every nested stack, opt-ins included, stay under 90% of each CloudFormation quota
    # (test_every_template_stays_under_90_percent_of_each_cloudformation_quota)
    assert set(synth.template.raw) == set(synth_opted_in.template.raw) and len(synth.template.raw) > 1


# CloudFormation's quotas of one template (AWS CloudFormation User Guide, "Quotas"): a stack over one does not deploy.
CLOUDFORMATION_QUOTAS = {
    "resources": 500,
    "outputs": 200,
    "parameters": 200,
    "mappings": 200,
    "bytes": 1_000_000,  # the template body uploaded to S3 (CDK uploads every template: nested ones always)
    "logical id length": 255,
    "description bytes": 1024,
}
QUOTA_SHARE = 0.9


def _quota_figures(template: dict[str, Any], size: int) -> dict[str, int]:
    names = [*template.get("Resources", {}), *template.get("Outputs", {}), *template.get("Parameters", {})]
    return {
        "resources": len(template.get("Resources", {})),
        "outputs": len(template.get("Outputs", {})),
        "parameters": len(template.get("Parameters", {})),
        "mappings": len(template.get("Mappings", {})),
        "bytes": size,
        "logical id length": max(map(len, names)),
        "description bytes": len(template.get("Description", "").encode()),
    }


def test_every_template_stays_under_90_percent_of_each_cloudformation_quota(
    synth: Synth, synth_opted_in: Synth
) -> None:
    # Given the root stack's and each nested stack's template, by default and with every opt-in
    figures = {
        f"{which}:{path}": _quota_figures(template, s.template.sizes[path])
        for which, s in (("default", synth), ("opted-in", synth_opted_in))
        for path, template in s.template.raw.items()
    }
    table = "\n".join(
        f"{name}: " + ", ".join(f"{k} {v}/{CLOUDFORMATION_QUOTAS[k]}" for k, v in f.items())
        for name, f in figures.items()
    )
    # Then no figure reaches 90% of its quota (room for the next functions before a deploy would fail)
    over = [
        f"{name} {k} {v} >= {QUOTA_SHARE:.0%} of {CLOUDFORMATION_QUOTAS[k]}"
        for name, f in figures.items()
        for k, v in f.items()
        if v >= QUOTA_SHARE * CLOUDFORMATION_QUOTAS[k]
    ]
    assert over == [], f"{over}\n{table}"
    # and the check can fail: a template one resource past 90% is reported
    crowded = {"Resources": {f"R{i}": {} for i in range(int(QUOTA_SHARE * 500))}}
    assert _quota_figures(crowded, 10)["resources"] >= QUOTA_SHARE * CLOUDFORMATION_QUOTAS["resources"]
    print(table)  # the figures, for `pytest -s` and the decision record (docs/decisions/0148-nested-stacks.md)


def test_routes_match_manifest_in_both_directions(synth: Synth) -> None:
    # Given the manifest route table
    expected = {r.key: r.function for r in routes.ROUTES}
    integrations = synth.of_type("AWS::ApiGatewayV2::Integration")
    # When every synthesized route is followed to the function its integration invokes
    actual: dict[str, str] = {}
    for route in synth.of_type("AWS::ApiGatewayV2::Route").values():
        target = route["Properties"]["Target"]["Fn::Join"][1]
        assert target[0] == "integrations/"
        integration = integrations[target[1]["Ref"]]["Properties"]
        assert integration["IntegrationType"] == "AWS_PROXY"
        assert integration["PayloadFormatVersion"] == "2.0"
        alias = synth.resources[integration["IntegrationUri"]["Ref"]]  # the live alias, never the function itself
        assert alias["Type"] == "AWS::Lambda::Alias" and alias["Properties"]["Name"] == "live"
        fn_logical_id = alias["Properties"]["FunctionName"]["Ref"]
        handler = synth.resources[fn_logical_id]["Properties"]["Handler"]
        actual[route["Properties"]["RouteKey"]] = next(
            f.name for f in manifest.FUNCTIONS if handler == f"{f.module}.lambda_handler"
        )
    # Then routes and targets are exactly the manifest's: nothing missing, nothing extra
    assert actual == expected


def test_routes_have_no_verb_segments(synth: Synth) -> None:
    # Given the synthesized route keys
    keys = [r["Properties"]["RouteKey"] for r in synth.of_type("AWS::ApiGatewayV2::Route").values()]
    # Then ":fork" and friends are dispatched by run_actions, never routed by API Gateway
    assert not [k for k in keys if ":" in k]
    assert "POST /runs/{runId}" in keys


def test_api_is_http_with_default_stage_access_logs_and_cors(synth: Synth) -> None:
    # Given the one HTTP API and its stage
    (api,) = synth.of_type("AWS::ApiGatewayV2::Api").values()
    (stage,) = synth.of_type("AWS::ApiGatewayV2::Stage").values()
    # Then it is an HTTP API whose CORS configuration (no corsOrigins context: every origin, no credentials) admits
    # every method and request header the protocol declares, Authorization by name
    assert api["Properties"]["ProtocolType"] == "HTTP"
    assert api["Properties"]["CorsConfiguration"] == {
        "AllowCredentials": False,
        "AllowOrigins": ["*"],
        "AllowMethods": ["GET", "POST", "PUT", "DELETE"],
        "AllowHeaders": [
            "accept-language",
            "authorization",
            "content-type",
            "idempotency-key",
            "if-none-match",
            "last-event-id",
            "openwop-client-version",
            "openwop-dedup",
            "openwop-force-engine-version",
            "openwop-version",
        ],
        "ExposeHeaders": [
            "Allow",
            "ETag",
            "OpenWOP-Idempotent-Replay",
            "OpenWOP-Version",
            "Retry-After",
            "WWW-Authenticate",
        ],
        "MaxAge": 600,
    }
    # and on the same stage, with JSON access logs carrying the request id
    assert stage["Properties"]["StageName"] == "$default"
    assert stage["Properties"]["AutoDeploy"] is True
    settings = stage["Properties"]["AccessLogSettings"]
    assert settings["DestinationArn"] == synth.resolve(synth.stack.api.access_logs.log_group_arn)
    assert json.loads(settings["Format"])["requestId"] == "$context.requestId"


def test_cors_origins_come_from_context_and_an_empty_list_turns_cors_off() -> None:
    from infra.constructs.api import cors_preflight

    # Given the corsOrigins context as an operator writes it
    listed = cors_preflight(manifest.cors_origins("https://app.example, https://admin.example/"))
    # Then a list grants exactly those origins, and an empty value no CORS configuration at all
    assert listed is not None and listed.allow_origins == ["https://app.example", "https://admin.example"]
    assert cors_preflight(manifest.cors_origins("")) is None


# --- Lambda functions -------------------------------------------------------------------------------------------


def test_one_lambda_per_manifest_function_with_its_handler(synth: Synth) -> None:
    # Given the synthesized functions
    functions = synth.of_type("AWS::Lambda::Function")
    # Then there is exactly one per manifest entry, with handler <module>.lambda_handler
    assert len(functions) == len(manifest.FUNCTIONS)
    for spec in manifest.FUNCTIONS:
        props = functions[synth.function_logical_id(spec.name)]["Properties"]
        assert props["Handler"] == f"{spec.module}.lambda_handler"
        assert props["Runtime"] == "python3.13"
        assert props["Architectures"] == ["arm64"]
        assert props["MemorySize"] == spec.memory_mb
        assert props["Timeout"] == spec.timeout_s
        assert props["Layers"] == [synth.resolve(synth.stack.functions.layer.layer_version_arn)]


def test_all_functions_share_one_code_asset(synth: Synth) -> None:
    # Given the code locations of all functions
    keys = {
        json.dumps(f["Properties"]["Code"], sort_keys=True) for f in synth.of_type("AWS::Lambda::Function").values()
    }
    # Then they all come from the same asset (build/lambda)
    assert len(keys) == 1


def test_function_environment_follows_manifest(synth: Synth) -> None:
    for spec in manifest.FUNCTIONS:
        # Given the environment of one function
        props = synth.resources[synth.function_logical_id(spec.name)]["Properties"]
        env: dict[str, Any] = props["Environment"]["Variables"]
        # Then it names exactly its tables, its bucket and the state machines it starts
        expected_tables = {manifest.table(key).env_var for key, _ in spec.tables}
        assert {k for k in env if k.endswith("_TABLE")} == expected_tables, spec.name
        for key, _ in spec.tables:
            assert env[manifest.table(key).env_var] == synth.resolve(synth.stack.tables.table(key).table_name)
        assert ("FIXTURES_BUCKET" in env) == (spec.bucket is not None), spec.name
        machines = {m.key: m for m in manifest.STATE_MACHINES}
        assert {k for k in env if k.endswith("_STATE_MACHINE_ARN")} == {machines[k].env_var for k in spec.starts}
        for key in spec.starts:
            assert env[machines[key].env_var] == synth.resolve(
                synth.stack.state_machines.machine(key).state_machine_arn
            )
        assert env["RETENTION_DAYS"] == str(RETENTION_DAYS)
        assert env["STAGE"] == STAGE  # a prod stage never serves mock model providers
        assert env["POWERTOOLS_SERVICE_NAME"] == "openwop-serverless"
        assert "POWERTOOLS_TRACE_DISABLED" not in env and props["TracingConfig"] == {"Mode": "Active"}
        assert env["POWERTOOLS_TRACER_CAPTURE_RESPONSE"] == "false"
        assert env["METRICS_NAMESPACE"] == f"OpenWOP/{STAGE}"
        assert env["RUN_STARTS_PER_MINUTE"] == "0" and env["EVAL_MAX_CONCURRENCY"] == "4"
        # and the ARNs of exactly its secrets, never secret material (API keys live hashed in the host table)
        secret_vars = {s.env_var: s.key for s in manifest.SECRETS if s.key in manifest.secrets_of(spec)}
        for var, key in secret_vars.items():
            assert env[var] == {"Ref": synth.logical_id(synth.stack.secrets.secret(key))}, spec.name
        # tenants' tool credentials: only the name prefix, for the functions that use them
        prefix_var = {"CREDENTIALS_SECRET_PREFIX"} if spec.credentials else set()
        if spec.credentials:
            assert env["CREDENTIALS_SECRET_PREFIX"] == f"openwop-serverless/{STAGE}/credentials", spec.name
        assert ("EGRESS_ALLOW" in env) == spec.egress, spec.name
        # the queue URLs of exactly the queues it sends to or consumes
        queues = set(spec.sends) | ({spec.consumes} if spec.consumes else set())
        assert {k for k in env if k.endswith("_QUEUE_URL")} == {manifest.queue(q).env_var for q in queues}
        for q in queues:
            assert env[manifest.queue(q).env_var] == synth.resolve(synth.stack.queues.queues[q].queue_url)
        assert not [
            k
            for k in env
            if re.search(r"API_?KEY|SECRET|TOKEN|PASSWORD", k) and k not in secret_vars and k not in prefix_var
        ]


# --- IAM --------------------------------------------------------------------------------------------------------


def test_get_run_has_no_write_actions(synth: Synth) -> None:
    # Given get_run, which only reads
    statements = synth.function_statements("get_run")
    # Then its role holds no DynamoDB or S3 write action on any resource
    actions = _actions(statements)
    assert not actions & DYNAMODB_WRITE_ACTIONS
    assert not [a for a in actions if a.startswith(("s3:Put", "s3:Delete"))]
    assert "dynamodb:Query" in actions


def test_read_only_functions_have_no_write_actions(synth: Synth) -> None:
    # Given every function whose manifest access is read-only everywhere
    readers = [f for f in manifest.FUNCTIONS if all(a == "read" for _, a in f.tables) and f.bucket in (None, "read")]
    assert readers
    for spec in readers:
        # Then no write action appears in its policies
        actions = _actions(synth.function_statements(spec.name))
        assert not actions & DYNAMODB_WRITE_ACTIONS, spec.name
        assert not [a for a in actions if a.startswith(("s3:Put", "s3:Delete"))], spec.name


def test_table_grants_cover_exactly_the_manifest_tables(synth: Synth) -> None:
    for spec in manifest.FUNCTIONS:
        # Given the DynamoDB data statements of one function (stream reads excluded)
        statements = [
            s
            for s in synth.function_statements(spec.name)
            if any(a.startswith("dynamodb:") for a in _as_list(s["Action"]))
            and "dynamodb:ListStreams" not in _as_list(s["Action"])
        ]
        resources = [r for s in statements for r in _as_list(s["Resource"])]
        # Then they name exactly the tables of its manifest entry (plus their index ARNs)
        table_arns = [r for r in resources if "Fn::GetAtt" in r]
        expected = [synth.resolve(synth.stack.tables.table(key).table_arn) for key, _ in spec.tables]
        assert sorted(map(json.dumps, table_arns)) == sorted(map(json.dumps, expected)), spec.name


def test_start_execution_only_on_manifest_machines(synth: Synth) -> None:
    for spec in manifest.FUNCTIONS:
        # Given the Step Functions statements of one function
        statements = synth.function_statements(spec.name)
        started = [r for s in _statements_with(statements, "states:StartExecution") for r in _as_list(s["Resource"])]
        stopped = [r for s in _statements_with(statements, "states:StopExecution") for r in _as_list(s["Resource"])]
        # Then StartExecution names exactly the machines it starts or continues runs on (continue-as-new), and
        # Stop/Describe only the executions of those it starts
        expected = [
            synth.resolve(synth.stack.state_machines.machine(k).state_machine_arn)
            for k in (*spec.starts, *spec.continues)
        ]
        assert sorted(map(json.dumps, started)) == sorted(map(json.dumps, expected)), spec.name
        assert len(stopped) == len(spec.starts), spec.name
        for key in spec.starts:
            name = synth.resolve(synth.stack.state_machines.machine(key).state_machine_name)
            pattern = {
                "Fn::Join": [
                    "",
                    [
                        "arn:",
                        {"Ref": "AWS::Partition"},
                        ":states:",
                        {"Ref": "AWS::Region"},
                        ":",
                        {"Ref": "AWS::AccountId"},
                        ":execution:",
                        name,
                        ":*",
                    ],
                ]
            }
            assert pattern in stopped, spec.name
        for s in _statements_with(statements, "states:StopExecution"):
            assert set(_as_list(s["Action"])) == {"states:StopExecution", "states:DescribeExecution"}


PSEUDO_PARAMETERS = {"AWS::Partition", "AWS::Region", "AWS::AccountId", "AWS::URLSuffix"}


def _pins_a_resource(part: Any, markers: tuple[str, ...]) -> bool:
    """``part`` of an ARN names something of this stack only: a reference to one of its resources (a ``Ref`` but to
    a pseudo parameter, a ``Fn::GetAtt``), or literal text with the stack's name or the stage's prefix."""
    if isinstance(part, str):
        return any(m in part for m in markers)
    if isinstance(part, dict) and "Ref" in part:
        return part["Ref"] not in PSEUDO_PARAMETERS
    return isinstance(part, dict) and "Fn::GetAtt" in part


def _before_first_wildcard(value: Any) -> list[Any] | None:
    """The parts of a resource ARN before its first ``*``, or None when it has none."""
    parts = value["Fn::Join"][1] if isinstance(value, dict) and "Fn::Join" in value else [value]
    before: list[Any] = []
    for part in parts:
        if isinstance(part, str) and "*" in part:
            return [*before, part.split("*", 1)[0]]
        before.append(part)
    return None


def test_no_resource_pattern_reaches_another_stages_resources(synth: Synth) -> None:
    # Given every statement of every IAM policy of the stack, roles of state machines and functions alike
    statements = [
        s for p in synth.of_type("AWS::IAM::Policy").values() for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert statements
    markers = (synth.stack.stack_name, f"/{STAGE}/")  # the stack's name; the stage's secret-name prefix
    # Then a resource with a wildcard (but the bare "*" of actions without resource-level permissions, and Bedrock's
    # models and inference profiles, which belong to no stage) is pinned to this stack or stage before its wildcard:
    # another stage's machine, execution, secret, bucket or table cannot match it
    loose = []
    for statement in statements:
        for resource in _as_list(statement.get("Resource", [])):
            if resource == "*" or ":bedrock:" in json.dumps(resource):
                continue
            before = _before_first_wildcard(resource)
            if before is not None and not any(_pins_a_resource(p, markers) for p in before):
                loose.append((statement["Action"], resource))
    assert loose == [], json.dumps(loose, indent=1)
    # and the eval machine (a Distributed Map) starts, describes and stops its own executions only, by its own name
    machine = synth.stack.state_machines.machine("eval")
    role = synth.resources[synth.logical_id(machine)]["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    own = synth.role_statements(role)
    started = [r for s in _statements_with(own, "states:StartExecution") for r in _as_list(s["Resource"])]
    assert started == [synth.resolve(machine.state_machine_arn)]
    stopped = [r for s in _statements_with(own, "states:StopExecution") for r in _as_list(s["Resource"])]
    name = synth.resolve(machine.state_machine_name)
    assert len(stopped) == 2 and all(r["Fn::Join"][1][-2:] in ([name, ":*"], [name, "/*"]) for r in stopped)
    assert "EvalStateMachine*" not in json.dumps(synth.template.to_json()["Resources"])


def test_create_run_starts_only_run_and_eval(synth: Synth) -> None:
    # Given create_run's StartExecution statements
    statements = _statements_with(synth.function_statements("create_run"), "states:StartExecution")
    resources = [r for s in statements for r in _as_list(s["Resource"])]
    # Then they name the run and eval machines and nothing else
    machines = synth.stack.state_machines
    assert sorted(map(json.dumps, resources)) == sorted(
        json.dumps(synth.resolve(machines.machine(k).state_machine_arn)) for k in ("run", "eval")
    )
    assert synth.resolve(machines.machine("fork").state_machine_arn) not in resources


# --- DynamoDB ---------------------------------------------------------------------------------------------------


def test_tables_match_manifest(synth: Synth) -> None:
    tables = synth.of_type("AWS::DynamoDB::GlobalTable")
    assert len(tables) == len(manifest.TABLES)
    for spec in manifest.TABLES:
        # Given the synthesized table of one manifest entry
        resource = tables[synth.logical_id(synth.stack.tables.table(spec.key))]
        props = resource["Properties"]
        # Then keys, TTL, PITR, billing, encryption, stream and GSIs are as declared
        key_schema = [{"AttributeName": spec.partition_key[0], "KeyType": "HASH"}]
        if spec.sort_key:
            key_schema.append({"AttributeName": spec.sort_key[0], "KeyType": "RANGE"})
        assert props["KeySchema"] == key_schema, spec.key
        types = {a["AttributeName"]: a["AttributeType"] for a in props["AttributeDefinitions"]}
        declared = [spec.partition_key, *([spec.sort_key] if spec.sort_key else [])]
        declared += [k for i in spec.indexes for k in (i.partition_key, i.sort_key)]
        assert types == dict(declared), spec.key
        assert props["TimeToLiveSpecification"] == {"AttributeName": spec.ttl_attribute, "Enabled": True}
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert props["SSESpecification"]["SSEEnabled"] is True
        (replica,) = props["Replicas"]
        assert replica["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        if spec.stream:
            assert props["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
        else:
            assert "StreamSpecification" not in props, spec.key
        indexes = {i["IndexName"]: (i["KeySchema"], i["Projection"]) for i in props.get("GlobalSecondaryIndexes", [])}
        assert indexes == {
            i.name: (
                [
                    {"AttributeName": i.partition_key[0], "KeyType": "HASH"},
                    {"AttributeName": i.sort_key[0], "KeyType": "RANGE"},
                ],
                {"ProjectionType": "ALL"},
            )
            for i in spec.indexes
        }, spec.key
        # and, outside dev, the table is retained and protected from deletion
        assert resource["DeletionPolicy"] == "Retain"
        assert resource["UpdateReplacePolicy"] == "Retain"
        assert replica["DeletionProtectionEnabled"] is True


def test_stateful_resources_are_destroyed_only_in_dev() -> None:
    from aws_cdk import RemovalPolicy

    from infra.constructs.common import removal_policy

    assert removal_policy("dev") == RemovalPolicy.DESTROY
    assert removal_policy("prod") == RemovalPolicy.RETAIN
    assert removal_policy("staging") == RemovalPolicy.RETAIN


# --- S3 ---------------------------------------------------------------------------------------------------------


def test_fixtures_bucket_is_private_encrypted_tls_only_and_expires_objects(synth: Synth) -> None:
    # Given the fixtures bucket
    bucket_id = synth.logical_id(synth.stack.fixtures.bucket)
    resource = synth.resources[bucket_id]
    props = resource["Properties"]
    # Then it is encrypted, blocks every public access, is unversioned and retained outside dev
    (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in ("AES256", "aws:kms")
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props.get("VersioningConfiguration", {}).get("Status") != "Enabled"
    assert resource["DeletionPolicy"] == "Retain"
    # and objects expire RETENTION_DAYS + 7 days after creation; incomplete uploads after 1 day
    rules = props["LifecycleConfiguration"]["Rules"]
    assert {"ExpirationInDays": RETENTION_DAYS + 7, "Id": "ExpireAfterRetention", "Status": "Enabled"} in rules
    assert any(r.get("AbortIncompleteMultipartUpload") == {"DaysAfterInitiation": 1} for r in rules)
    # and server access logs go to the access-log bucket
    assert props["LoggingConfiguration"]["DestinationBucketName"] == {
        "Ref": synth.logical_id(synth.stack.fixtures.access_logs)
    }
    # and the bucket policy denies every request without TLS
    policies = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in synth.of_type("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    (statements,) = policies
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
    )


# --- Secrets Manager --------------------------------------------------------------------------------------------


def test_secrets_match_manifest_with_generated_values(synth: Synth) -> None:
    secrets = synth.of_type("AWS::SecretsManager::Secret")
    assert len(secrets) == len(manifest.SECRETS)
    for spec in manifest.SECRETS:
        # Given the synthesized secret of one manifest entry
        resource = secrets[synth.logical_id(synth.stack.secrets.secret(spec.key))]
        props = resource["Properties"]
        # Then CloudFormation generates its value (none in the template), and it is retained outside dev
        assert "SecretString" not in props
        generated = {"ExcludePunctuation": True, "PasswordLength": 64}
        if spec.json_key:  # {"current": <generated>}: the API-key pepper document
            generated |= {"SecretStringTemplate": "{}", "GenerateStringKey": spec.json_key}
        assert props["GenerateSecretString"] == generated
        assert resource["DeletionPolicy"] == "Retain"


def test_only_the_declared_functions_may_read_each_secret(synth: Synth) -> None:
    assert manifest.function("list_runs").secrets == (manifest.CURSOR,)
    # the API-key pepper: every function behind an authenticated route, and no task, stream or public function
    readers = {f.name for f in manifest.FUNCTIONS if manifest.APIKEY_PEPPER in manifest.secrets_of(f)}
    # and the agent gateway, whose session tokens are keyed under it (decision 0143)
    assert readers == {r.function for r in routes.ROUTES if r.auth} | {"agent_gateway"}
    assert not readers & {"advance_run", "erase_run", "not_found", "get_capabilities", "get_openapi"}
    for spec in manifest.FUNCTIONS:
        # Given the Secrets Manager statements of one function
        statements = [
            s
            for s in synth.function_statements(spec.name)
            if any(a.startswith("secretsmanager:") for a in _as_list(s["Action"]))
        ]
        host_secrets = [s for s in statements if "credentials/*" not in json.dumps(s["Resource"])]
        # (CDK merges same-action statements: a read of a manifest secret may share one with the credentials prefix)
        resources = [r for s in statements for r in _as_list(s["Resource"]) if "credentials/*" not in json.dumps(r)]
        # Then it reads exactly its manifest secrets, by ARN, and writes none
        expected = [{"Ref": synth.logical_id(synth.stack.secrets.secret(k))} for k in manifest.secrets_of(spec)]
        assert sorted(map(json.dumps, resources)) == sorted(map(json.dumps, expected)), spec.name
        assert _actions(host_secrets) <= {"secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"}, spec.name
        # and tenants' tool credentials only under this stage's prefix, written only where the manifest says so
        credential = [s for s in statements if "credentials/*" in json.dumps(s["Resource"])]
        assert bool(credential) == bool(spec.credentials), spec.name
        for statement in credential:
            assert f":secret:openwop-serverless/{STAGE}/credentials/*" in json.dumps(statement["Resource"])
        writes = _actions(credential) - {"secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"}
        assert bool(writes) == (spec.credentials == "readwrite"), spec.name


def test_only_model_calling_functions_may_invoke_bedrock(synth: Synth) -> None:
    callers = {f.name for f in manifest.FUNCTIONS if f.models}
    assert callers == {"advance_run", "run_eval_trial", "agent_gateway"}  # the model gateway forwards to Bedrock
    for spec in manifest.FUNCTIONS:
        statements = [
            s
            for s in synth.function_statements(spec.name)
            if any(a.startswith("bedrock:") for a in _as_list(s["Action"]))
        ]
        assert bool(statements) == (spec.name in callers), spec.name
        assert _actions(statements) <= {"bedrock:InvokeModel"}, spec.name
        for statement in statements:
            text = json.dumps(statement["Resource"])
            assert "foundation-model/*" in text and "inference-profile/*" in text


# --- Step Functions ---------------------------------------------------------------------------------------------


def test_state_machine_definitions_are_the_asl_files(synth: Synth) -> None:
    from infra.constructs.state_machines import placeholders

    machines = synth.of_type("AWS::StepFunctions::StateMachine")
    assert len(machines) == len(manifest.STATE_MACHINES)
    for spec in manifest.STATE_MACHINES:
        # Given one synthesized state machine and its ASL file
        text = (ROOT / spec.file).read_text()
        props = machines[synth.logical_id(synth.stack.state_machines.machine(spec.key))]["Properties"]
        # Then the definition is the file, inline and byte for byte
        assert props["DefinitionString"] == text
        assert props["StateMachineType"] == "STANDARD"
        assert props["LoggingConfiguration"]["Level"] == "ALL"
        # and the substitutions are exactly the file's placeholders, each resolved to its manifest target
        subs = props["DefinitionSubstitutions"]
        assert set(subs) == placeholders(text), spec.key
        for name, ref in spec.substitutions.items():
            kind, _, key = ref.partition(":")
            if kind == "function":  # the live alias: a task never invokes $LATEST
                expected = synth.resolve(synth.stack.functions.alias_arn(key))
            elif kind == "setting":
                expected = str(manifest.ASL_SETTINGS[key][1])
            elif kind == "table":
                expected = synth.resolve(synth.stack.tables.table(key).table_name)
            elif kind == "machine":  # a chained machine's hold machine (decision 0191)
                expected = synth.resolve(synth.stack.state_machines.machine(key).state_machine_arn)
            else:
                expected = synth.resolve(synth.stack.fixtures.bucket.bucket_name)
            assert subs[name] == expected, (spec.key, name)


def test_state_machines_invoke_exactly_their_functions(synth: Synth) -> None:
    for spec in manifest.STATE_MACHINES:
        # Given the role of one state machine
        props = synth.resources[synth.logical_id(synth.stack.state_machines.machine(spec.key))]["Properties"]
        statements = synth.role_statements(props["RoleArn"]["Fn::GetAtt"][0])
        invoke = _statements_with(statements, "lambda:InvokeFunction")
        resources = [r for s in invoke for r in _as_list(s["Resource"])]
        # Then it may invoke exactly the manifest's functions' live aliases (what the ASL files' placeholders name)
        expected = [synth.resolve(synth.stack.functions.alias_arn(f)) for f in spec.invokes]
        assert sorted(map(json.dumps, resources)) == sorted(map(json.dumps, expected)), spec.key


def _literal_prefix(value: Any) -> str:
    """The literal text a (possibly ``Fn::Join``ed) CloudFormation string starts with, up to its first token."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        text = ""
        for i, part in enumerate(parts):
            if not isinstance(part, str):
                return text
            text += part if i == 0 else separator + part
        return text
    return ""


def test_state_machines_log_to_vended_log_groups_unique_per_stack(synth: Synth) -> None:
    from infra.constructs.state_machines import VENDED_LOGS_PREFIX

    # Given every log group a state machine's logging configuration names
    groups = synth.of_type("AWS::Logs::LogGroup")
    named = []
    for machine in synth.of_type("AWS::StepFunctions::StateMachine").values():
        for destination in machine["Properties"]["LoggingConfiguration"]["Destinations"]:
            arn = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]
            named.append(groups[arn["Fn::GetAtt"][0]]["Properties"]["LogGroupName"])
    assert len(named) == len(manifest.STATE_MACHINES) == len({json.dumps(n) for n in named})
    for name in named:
        # Then its name is under the vended-logs prefix (no entry in the account's Logs resource policy needed)
        assert _literal_prefix(name).startswith(VENDED_LOGS_PREFIX), name
        # and carries the stack's name and its GUID, so a group RETAINed from an earlier stack never collides
        assert _literal_prefix(name).startswith(f"{VENDED_LOGS_PREFIX}{synth.stack.stack_name}-"), name
        assert "AWS::StackId" in json.dumps(name), name


# --- Streams ----------------------------------------------------------------------------------------------------


def _stream_mappings(synth: Synth) -> list[dict[str, Any]]:
    return [
        m for m in synth.of_type("AWS::Lambda::EventSourceMapping").values() if "StartingPosition" in m["Properties"]
    ]


def test_streams_feed_erase_run_with_removes_and_the_webhook_fanout_with_inserts(synth: Synth) -> None:
    # Given the stream event source mappings
    mappings = _stream_mappings(synth)
    assert len(mappings) == len(manifest.STREAM_CONSUMERS)
    for table_key, function_name in manifest.STREAM_CONSUMERS:
        (props,) = [
            m["Properties"] for m in mappings if synth.names_alias(m["Properties"]["FunctionName"], function_name)
        ]
        # Then the runs table stream reaches erase_run filtered to REMOVE, the events table's the fan-out filtered
        # to INSERT (an event is fanned out once stored), with partial-failure semantics
        assert props["EventSourceArn"] == synth.resolve(synth.stack.tables.table(table_key).table_stream_arn)
        wanted = manifest.STREAM_EVENT_NAMES[(table_key, function_name)]
        assert [json.loads(f["Pattern"]) for f in props["FilterCriteria"]["Filters"]] == [{"eventName": [wanted]}]
        assert props["StartingPosition"] == "LATEST"
        assert props["BatchSize"] == 100
        assert props["BisectBatchOnFunctionError"] is True
        assert props["MaximumRetryAttempts"] > 0
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert "OnFailure" in props["DestinationConfig"]
        # and the fan-out waits a few seconds to take many pages per invocation (decision 0151), the erasure hook not
        window = manifest.STREAM_BATCHING_WINDOW_S.get((table_key, function_name))
        assert props.get("MaximumBatchingWindowInSeconds") == window
        assert (function_name, window) in (("fanout_webhooks", 3), ("erase_run", None))


# --- The agent gateway's function URL ---------------------------------------------------------------------------


def test_the_agent_gateway_is_served_by_a_public_buffered_url_on_its_live_alias(synth: Synth) -> None:
    from infra.constructs.concurrency import DEFAULT_RESERVED

    # Given the function URLs of the stack
    urls = synth.of_type("AWS::Lambda::Url")
    gateway = synth.function_logical_id("agent_gateway")
    # Then there is one, the agent gateway's, public (the handler's token check authorizes), buffered, on its alias
    assert [manifest.function(n).name for n in synth.stack.functions.urls] == ["agent_gateway"]
    ((url_id, url),) = urls.items()
    assert url["Properties"] == {
        "AuthType": "NONE",
        "InvokeMode": "BUFFERED",
        "Qualifier": "live",
        "TargetFunctionArn": {"Fn::GetAtt": [gateway, "Arn"]},
    }
    # and anyone may invoke the alias through the URL only (Lambda wants both permissions for a NONE URL)
    public = [
        p["Properties"]
        for p in synth.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "*"
    ]
    assert sorted(public, key=lambda p: p["Action"]) == [
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": {"Ref": synth.alias_logical_id("agent_gateway")},
            "InvokedViaFunctionUrl": True,
            "Principal": "*",
        },
        {
            "Action": "lambda:InvokeFunctionUrl",
            "FunctionName": {"Ref": synth.alias_logical_id("agent_gateway")},
            "FunctionUrlAuthType": "NONE",
            "Principal": "*",
        },
    ]
    # and the URL and its function live in the root stack, where the run tasks that read the URL are
    root = synth.template.raw[synth.stack.node.path]["Resources"]
    assert url_id in root and gateway in root
    # and reserved concurrency is its ceiling (no stage throttle is in front of a function URL)
    props = synth.resources[gateway]["Properties"]
    assert props["ReservedConcurrentExecutions"] == DEFAULT_RESERVED["agent_gateway"] == 40
    # and the functions that hand out gateway URLs get the URL as GATEWAY_URL; no other, not the gateway itself
    given = {
        spec.name: env["GATEWAY_URL"]
        for spec in manifest.FUNCTIONS
        if "GATEWAY_URL"
        in (env := synth.resources[synth.function_logical_id(spec.name)]["Properties"]["Environment"]["Variables"])
    }
    assert given == {
        name: {"Fn::GetAtt": [url_id, "FunctionUrl"]}
        for name in ("manage_agents", "run_actions", "get_eval_report", "run_eval_trial")
    }
    # and the gateway may end a waiting eval trial (complete resumes the Map's WaitAgent task)
    resumes = _statements_with(synth.function_statements("agent_gateway"), "states:SendTaskSuccess")
    assert [s["Resource"] for s in resumes] == [
        synth.resolve(synth.stack.state_machines.machine("eval").state_machine_arn)
    ]


def test_the_advance_task_continues_a_run_on_its_own_machine(synth: Synth) -> None:
    # Given the run task that continues a long run in a new execution (continue-as-new)
    env = synth.resources[synth.function_logical_id("advance_run")]["Properties"]["Environment"]["Variables"]
    # Then its environment names no machine (the machines invoke it: a reference back would close a cycle)
    assert not any(spec.env_var in env for spec in manifest.STATE_MACHINES)
    # and its role may start executions of the run and fork machines, which its task names ($$.StateMachine.Id), and
    # of their hold machines, which a chained task is told (decision 0191)
    starts = _statements_with(synth.function_statements("advance_run"), "states:StartExecution")
    assert sorted(json.dumps(s["Resource"], sort_keys=True) for s in starts) == sorted(
        json.dumps(synth.resolve(synth.stack.state_machines.machine(key).state_machine_arn), sort_keys=True)
        for key in ("run", "fork", "run_hold", "fork_hold")
    )
    for file in ("run.asl.json", "fork-replay.asl.json", "run-chain.asl.json", "fork-chain.asl.json"):
        advance = json.loads((ROOT / "statemachines" / file).read_text())["States"]["Advance"]
        assert advance["Parameters"]["Payload"]["stateMachine.$"] == "$$.StateMachine.Id"
    # the chained machines name their hold machines by ARN, resolved by CloudFormation
    for key, hold in (("run", "run_hold"), ("fork", "fork_hold")):
        machine = synth.resources[
            synth.stack.get_logical_id(synth.stack.state_machines.machine(key).node.default_child)
        ]
        assert synth.resolve(synth.stack.state_machines.machine(hold).state_machine_arn) in list(
            machine["Properties"]["DefinitionSubstitutions"].values()
        )


def test_the_hold_machines_keep_the_resources_of_the_machines_before_chaining(synth: Synth) -> None:
    # Given the stack's state machines (decision 0191)
    ids = {
        key: synth.stack.get_logical_id(synth.stack.state_machines.machine(key).node.default_child)
        for key in ("run", "fork", "run_hold", "fork_hold")
    }
    # Then the looping machines keep the construct ids run and fork had (a build from before starts them from its
    # environment during a traffic shift), and the chained ones are new
    assert ids["run_hold"].startswith("HostStateMachinesRunStateMachine") and ids["fork_hold"].startswith(
        "HostStateMachinesForkStateMachine"
    )
    assert ids["run"].startswith("HostStateMachinesRunChainStateMachine")
    assert ids["fork"].startswith("HostStateMachinesForkChainStateMachine")


def test_the_functions_that_hand_out_gateway_urls_are_marked_in_the_manifest() -> None:
    # Given the services that build gateway URLs from the gateway_url setting
    services = ROOT / "shared" / "services"
    readers = {p.stem for p in services.rglob("*.py") if "settings.gateway_url" in p.read_text()}
    assert readers == {"agent_sessions", "eval_trials"}
    # Then every function whose handler uses them is marked gateway_url (the stack gives it GATEWAY_URL), and no other
    for spec in manifest.FUNCTIONS:
        source = (ROOT / (spec.module.replace(".", "/") + ".py")).read_text()
        uses = any(re.search(rf"\b{name}\.", source) for name in readers)
        assert spec.gateway_url == uses, spec.name
    # and the gateway never needs its own URL (no cycle): it is served by it
    assert manifest.function("agent_gateway").url and not manifest.function("agent_gateway").gateway_url


# --- cdk-nag ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["synth", "synth_opted_in"])
@pytest.mark.parametrize("pack", ["AwsSolutionsChecks", "ServerlessChecks"])
def test_cdk_nag_reports_no_error(which: str, pack: str, request: pytest.FixtureRequest) -> None:
    import cdk_nag

    # Given the AwsSolutions and Serverless packs (as `make synth` runs them) over the stack, by default and opted in
    # (acknowledgments applied; each has a specific reason, below)
    report = getattr(cdk_nag, pack)().validate_scope(request.getfixturevalue(which).stack)
    # Then no finding is left unacknowledged, of any level
    findings = [
        f"{v.rule_name} ({v.severity}): {[r.construct_path for r in v.violating_resources]}" for v in report.violations
    ]
    assert findings == []


def test_every_nag_acknowledgment_has_a_reason(synth: Synth) -> None:
    from aws_cdk import Validations

    # Given every acknowledgment recorded in the construct tree
    acknowledgments: dict[str, str] = {}
    for construct in synth.stack.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                for rule, reason in dict(entry.data).items():
                    acknowledgments[f"{construct.node.path}:{rule}"] = str(reason)
    # Then each one carries a real reason
    assert acknowledgments
    assert {k: r for k, r in acknowledgments.items() if len(r.strip()) < 10} == {}


# --- Handlers and packaging -------------------------------------------------------------------------------------


def _defines_lambda_handler(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "lambda_handler":
            return True
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "lambda_handler" for t in targets):
                return True
    return False


def test_manifest_handler_modules_match_handler_files() -> None:
    # Given the manifest modules and the handler files on disk
    modules = {f.module: ROOT / (f.module.replace(".", "/") + ".py") for f in manifest.FUNCTIONS}
    on_disk = {p for p in (ROOT / "functions").rglob("handler.py") if "_common" not in p.parts}
    # Then every manifest module names a handler.py under functions/ ...
    for module, path in modules.items():
        assert module.startswith("functions.") and path.name == "handler.py", module
    # ... every handler file present defines lambda_handler ...
    for module, path in modules.items():
        if path.exists():
            assert _defines_lambda_handler(path), module
    # ... and every handler file on disk belongs to a manifest function.
    assert on_disk <= set(modules.values()), sorted(str(p.relative_to(ROOT)) for p in on_disk - set(modules.values()))
    # ... and every manifest function has its handler file.
    assert all(p.exists() for p in modules.values()), sorted(m for m, p in modules.items() if not p.exists())


def test_packaging_copies_deployable_sources_with_unchecked_pyc(tmp_path: Path) -> None:
    import importlib.util

    from infra.packaging import build_lambda, lambda_interpreter

    # Given a build of the Lambda code asset into a temporary directory
    target = build_lambda(tmp_path / "lambda")
    # Then the embedded host, the command line, tests and stale caches are left out
    assert (target / "shared" / "manifest" / "resources.py").exists()
    assert not (target / "shared" / "local").exists()
    assert not (target / "shared" / "cli").exists()  # the command line: a user's tool, never deployed
    assert not list(target.rglob("tests"))
    assert not list(target.rglob("*.pyc")) or all(p.parent.name == "__pycache__" for p in target.rglob("*.pyc"))
    # and byte code sits in __pycache__ as unchecked-hash files (valid whatever mtimes the zip gives the sources)
    from infra.runtimes import LAMBDA_PYTHON

    # (for the Lambda runtime's Python: pyenv's python3.13 on this machine kind, found by infra.packaging)
    assert lambda_interpreter() is not None
    tag = f"cpython-{LAMBDA_PYTHON[0]}{LAMBDA_PYTHON[1]}"
    pyc = target / "shared" / "manifest" / "__pycache__" / f"resources.{tag}.pyc"
    assert pyc.exists() and not list(target.rglob(f"*.{importlib.util.cache_from_source('x.py').split('.')[-2]}.pyc"))
    flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
    assert flags == 0b01  # hash-based, check_source off


# --- Stack outputs ----------------------------------------------------------------------------------------------


def test_the_conformance_seams_are_off_unless_context_turns_them_on(synth: Synth) -> None:
    # Given the stack synthesized without conformanceSeams
    envs = {
        spec.name: synth.resources[synth.function_logical_id(spec.name)]["Properties"]["Environment"]["Variables"]
        for spec in manifest.FUNCTIONS
    }
    # Then no function gets the setting (the code's default: off), while the seam routes exist and refuse
    assert all("OPENWOP_CONFORMANCE_SEAMS" not in env for env in envs.values())
    routes = {r["Properties"]["RouteKey"] for r in synth.of_type("AWS::ApiGatewayV2::Route").values()}
    assert {
        "POST /conformance/seams/sample/event-log/seed",
        "POST /conformance/seams/sample/effect-seams/fire",
        "GET /runs/{runId}/effects",
    } <= routes


def test_outputs_locate_every_resource_the_operator_cli_needs(synth: Synth) -> None:
    from shared import settings

    # Given the synthesized stack outputs
    outputs = synth.template.to_json()["Outputs"]
    # Then each runtime resource env var has an output of the same value the functions get, under its exact key
    values = {}
    for spec in manifest.FUNCTIONS:
        env = synth.resources[synth.function_logical_id(spec.name)]["Properties"]["Environment"]["Variables"]
        values.update(env)
    for var in settings.resource_env_vars():
        key = settings.output_key(var)
        assert key in outputs, key
        assert outputs[key]["Value"] == values[var], var
    # and the API URL is one too
    assert outputs["ApiUrl"]["Value"] == synth.resolve(synth.stack.api.http_api.api_endpoint)
    assert {"RunsTableName", "FixturesBucketName", "RunStateMachineArn", "PepperSecretId"} <= set(outputs)
    # and each output is also an SSM parameter under /openwop-serverless/<stage>/
    params = {p["Properties"]["Name"]: p["Properties"]["Value"] for p in synth.of_type("AWS::SSM::Parameter").values()}
    assert set(outputs) == {settings.output_key(v) for v in settings.resource_env_vars()} | {"ApiUrl", "AlarmTopicArn"}
    for key, output in outputs.items():
        if key != "AlarmTopicArn":
            assert params[f"/openwop-serverless/{STAGE}/{key}"] == output["Value"], key


# --- Alarms and dashboard ---------------------------------------------------------------------------------------


def _default_alarm_names() -> set[str]:
    from infra.constructs.common import pascal

    return (
        {"Api5xx"}
        | {f"{pascal(m.key)}ExecutionsFailed" for m in manifest.STATE_MACHINES}
        | {
            "ErasureFailures" if fn == "erase_run" else f"{pascal(fn)}StreamFailures"
            for _, fn in manifest.STREAM_CONSUMERS
        }
        | {f"{pascal(q.key)}DeadLetters" for q in manifest.QUEUES}
        | {"DynamoDbThrottles", "WebhookFanoutLag"}
        | {f"{pascal(q.key)}QueueAge" for q in manifest.QUEUES}
        | {f"{pascal(m.key)}ExecutionsThrottled" for m in manifest.STATE_MACHINES}
        | {f"{pascal(f.name)}Throttles" for f in manifest.FUNCTIONS if f.kind == "task"}
    )


def test_default_alarms_cover_api_machines_failure_queues_throttles_and_webhook_lag(synth: Synth) -> None:
    from bench.costs import idle_inventory_from_template
    from bench.prices import CLOUDWATCH_FREE_ALARM_METRICS
    from infra.constructs.common import pascal

    # Given the synthesized alarms of the default stack and the alarm topic
    alarms = synth.of_type("AWS::CloudWatch::Alarm")
    (topic_id,) = synth.of_type("AWS::SNS::Topic")
    canary = {synth.logical_id(a) for a in synth.stack.deployments.canary_alarms.values()}
    # Then every alarm but the canary ones (each function's, read by its deployment group: test_deployable.py)
    # notifies that topic, and the canary ones notify nobody
    assert len(canary) == len(manifest.FUNCTIONS)
    for logical, alarm in alarms.items():
        if logical in canary:
            assert "AlarmActions" not in alarm["Properties"], logical
        else:
            assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_id}], logical
    # and there is one for API 5xx, one per state machine, one per stream failure queue, one per dead-letter queue
    # (webhook deliveries that exhausted their retries), DynamoDB throttles, the fan-out's lag and each queue's age,
    # one per state machine's throttled executions, and no per-function alarm but the fan-out's lag and the run
    # tasks' throttles
    mon = synth.stack.monitoring.alarms
    assert set(mon) == _default_alarm_names() and len(alarms) == len(mon) + len(canary)
    tasks = {f.name for f in manifest.FUNCTIONS if f.kind == "task"}
    per_function = (
        {synth.logical_id(mon["WebhookFanoutLag"])}
        | {synth.logical_id(mon[f"{pascal(name)}Throttles"]) for name in tasks}
        | canary
    )
    blob = json.dumps({k: a for k, a in alarms.items() if k not in per_function})
    for spec in manifest.FUNCTIONS:
        assert synth.function_logical_id(spec.name) not in blob, spec.name
    # and each paging alarm watches one metric but the throttle alarm (read + write throttles of each watched table):
    # 33 metrics (two per state machine); each canary alarm two (errors and invocations): 111 in all, 101 past
    # CloudWatch's 10 free ones ($10.10 a month at list price, what bench.costs prices)
    throttles_id = synth.logical_id(mon["DynamoDbThrottles"])
    assert all("Metrics" not in a["Properties"] for k, a in alarms.items() if k != throttles_id and k not in canary)
    metrics = len(mon) - 1 + 2 * sum(1 for t in manifest.TABLES if t.throttle_alarm)
    assert metrics == 33
    total = idle_inventory_from_template(synth.template.to_json())["alarm_metrics"]
    assert total == metrics + 2 * len(canary) == 111
    assert total - CLOUDWATCH_FREE_ALARM_METRICS == 101
    erasure = alarms[synth.logical_id(mon["ErasureFailures"])]["Properties"]
    queue = synth.stack.streams.failure_queues[(manifest.RUNS, "erase_run")]
    assert erasure["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert erasure["Dimensions"][0]["Value"] == synth.resolve(queue.queue_name)
    for key, machine in synth.stack.state_machines.machines.items():
        failed = alarms[synth.logical_id(mon[f"{pascal(key)}ExecutionsFailed"])]["Properties"]
        assert (failed["Namespace"], failed["MetricName"]) == ("AWS/States", "ExecutionsFailed")
        assert failed["Dimensions"] == [{"Name": "StateMachineArn", "Value": synth.resolve(machine.state_machine_arn)}]
    # and the topic ARN is an output, for subscriptions
    assert "AlarmTopicArn" in synth.template.to_json()["Outputs"]


def test_step_functions_and_run_task_throttles_are_alarmed_by_default(synth: Synth) -> None:
    from infra.constructs.common import pascal

    # Given the default stack's alarms
    alarms = synth.of_type("AWS::CloudWatch::Alarm")
    mon = synth.stack.monitoring.alarms
    for key, machine in synth.stack.state_machines.machines.items():
        # Then each state machine has an alarm on its own throttled executions
        props = alarms[synth.logical_id(mon[f"{pascal(key)}ExecutionsThrottled"])]["Properties"]
        assert (props["Namespace"], props["MetricName"], props["Statistic"]) == (
            "AWS/States",
            "ExecutionThrottled",
            "Sum",
        )
        assert props["Dimensions"] == [{"Name": "StateMachineArn", "Value": synth.resolve(machine.state_machine_arn)}]
        assert (props["Threshold"], props["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    tasks = [f.name for f in manifest.FUNCTIONS if f.kind == "task"]
    assert {"advance_run", "run_eval_trial"} <= set(tasks)
    for name in tasks:
        # and each run task an alarm on its own Lambda throttles, without detailedAlarms
        props = alarms[synth.logical_id(mon[f"{pascal(name)}Throttles"])]["Properties"]
        assert (props["Namespace"], props["MetricName"], props["Statistic"]) == ("AWS/Lambda", "Throttles", "Sum")
        assert props["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": synth.function_logical_id(name)}}]


def test_disabling_or_scheduling_deletion_of_the_signing_key_notifies_the_alarm_topic(synth: Synth) -> None:
    # Given the EventBridge rules of the default stack and the alarm topic
    rules = synth.of_type("AWS::Events::Rule")
    (topic_id,) = synth.of_type("AWS::SNS::Topic")
    key = synth.stack.secrets.key(manifest.SIGNING)
    # Then one rule matches the CloudTrail events that disable the signing key or schedule its deletion, by its ARN
    props = rules[synth.logical_id(synth.stack.monitoring.rules["SigningKeyDisabled"])]["Properties"]
    assert props["State"] == "ENABLED"
    assert props["EventPattern"] == {
        "source": ["aws.kms"],
        "detail-type": ["AWS API Call via CloudTrail"],
        "detail": {
            "eventSource": ["kms.amazonaws.com"],
            "eventName": ["DisableKey", "ScheduleKeyDeletion"],
            "resources": {"ARN": [synth.resolve(key.key_arn)]},
        },
    }
    # and sends the event to the alarm topic, which lets EventBridge publish
    assert [t["Arn"] for t in props["Targets"]] == [{"Ref": topic_id}]
    policies = [p["Properties"] for p in synth.of_type("AWS::SNS::TopicPolicy").values()]
    assert any(
        {"Ref": topic_id} in p["Topics"]
        and any(
            s.get("Principal") == {"Service": "events.amazonaws.com"} and s["Action"] == "sns:Publish"
            for s in p["PolicyDocument"]["Statement"]
        )
        for p in policies
    )


def test_detailed_alarms_add_function_and_execution_alarms_when_asked(synth_opted_in: Synth) -> None:
    # Given the stack synthesized with detailedAlarms=true
    alarms = synth_opted_in.of_type("AWS::CloudWatch::Alarm")
    mon = synth_opted_in.stack.monitoring.alarms
    # Then the default alarms are there, plus one per function and one more per state machine (beside each function's
    # canary alarm, which notifies nobody)
    canary = {synth_opted_in.logical_id(a) for a in synth_opted_in.stack.deployments.canary_alarms.values()}
    assert _default_alarm_names() < set(mon) and len(alarms) == len(mon) + len(canary) == len(mon) + len(
        manifest.FUNCTIONS
    )
    assert len(mon) == len(_default_alarm_names()) + len(manifest.FUNCTIONS) + len(manifest.STATE_MACHINES)
    blob = json.dumps(alarms)
    for spec in manifest.FUNCTIONS:
        assert synth_opted_in.function_logical_id(spec.name) in blob, spec.name
    run_machine = alarms[synth_opted_in.logical_id(mon["RunExecutionsTimedOutOrAborted"])]["Properties"]
    names = {m["MetricStat"]["Metric"]["MetricName"] for m in run_machine["Metrics"] if "MetricStat" in m}
    assert names == {"ExecutionsTimedOut", "ExecutionsAborted"}
    (topic_id,) = synth_opted_in.of_type("AWS::SNS::Topic")
    assert all(a["Properties"]["AlarmActions"] == [{"Ref": topic_id}] for k, a in alarms.items() if k not in canary)
    assert all("AlarmActions" not in alarms[k]["Properties"] for k in canary)


def test_no_dashboard_unless_asked(synth: Synth, synth_opted_in: Synth) -> None:
    # Given the default synthesis
    # Then there is no dashboard; with dashboard=true there is one
    assert synth.of_type("AWS::CloudWatch::Dashboard") == {} and synth.stack.monitoring.dashboard is None
    assert len(synth_opted_in.of_type("AWS::CloudWatch::Dashboard")) == 1


def test_erasure_stream_has_an_on_failure_destination(synth: Synth) -> None:
    # Given the runs-table event source mapping
    (mapping,) = [m for m in _stream_mappings(synth) if synth.names_alias(m["Properties"]["FunctionName"], "erase_run")]
    queue = synth.stack.streams.failure_queues[(manifest.RUNS, "erase_run")]
    # Then records that keep failing go to the alarmed queue
    dest = mapping["Properties"]["DestinationConfig"]["OnFailure"]["Destination"]
    assert dest == synth.resolve(queue.queue_arn)


# --- Protection -------------------------------------------------------------------------------------------------


def test_stage_throttling_and_eval_concurrency_come_from_context(tmp_path: Path) -> None:
    from infra.app import build_app

    # Given a stack synthesized with explicit throttling and eval concurrency context
    _, stack = build_app(
        {
            "stage": "qa",
            "throttleRate": "7",
            "throttleBurst": "11",
            "evalMaxConcurrency": "3",
            "runStartsPerMinute": "30",
        },
        outdir=str(tmp_path),
        nag=False,
    )
    resources = synthesize(stack).to_json()["Resources"]
    # Then the $default stage throttles at that rate and burst
    (stage,) = [r for r in resources.values() if r["Type"] == "AWS::ApiGatewayV2::Stage"]
    assert stage["Properties"]["DefaultRouteSettings"] == {"ThrottlingBurstLimit": 11, "ThrottlingRateLimit": 7}
    # and the eval trials task gets the Map's concurrency, which the ASL reads from the Prepare output
    fn = resources[stack.resolve(stack.functions.function("run_eval_trial").node.default_child.ref)["Ref"]]
    assert fn["Properties"]["Environment"]["Variables"]["EVAL_MAX_CONCURRENCY"] == "3"
    # and create_run gets the per-tenant run-start quota
    create = resources[stack.resolve(stack.functions.function("create_run").node.default_child.ref)["Ref"]]
    assert create["Properties"]["Environment"]["Variables"]["RUN_STARTS_PER_MINUTE"] == "30"
    asl = json.loads((ROOT / "statemachines/eval-run.asl.json").read_text())
    assert asl["States"]["Trials"]["MaxConcurrencyPath"] == "$.maxConcurrency"
    assert "MaxConcurrency" not in asl["States"]["Trials"]
    assert asl["States"]["Prepare"]["ResultSelector"]["maxConcurrency.$"] == "$.Payload.maxConcurrency"


# --- Seeding and runtime settings from context ------------------------------------------------------------------


def test_no_seed_resource_unless_asked(synth: Synth) -> None:
    # Given the default synthesis (no seed context)
    # Then there is no seed custom resource (the seed_host function exists but nothing invokes it)
    assert not synth.of_type("Custom::OpenWopSeed")
    assert synth.stack.seeding is None


COLLECTOR_LAYER = "arn:aws:lambda:us-east-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1"


def test_seed_and_runtime_settings_from_context_reach_the_stack(tmp_path: Path) -> None:
    from infra.app import build_app
    from infra.constructs.runtime_settings import RUNTIME_SETTINGS
    from infra.constructs.seeding import fixtures_digest

    # Given a test stage synthesized with seeding and every runtime setting from context
    given = {
        "httpAllowlist": "api.example.com, hooks.example.com:8443",
        "runToolCallBudget": "50",
        "sessionTtlSeconds": "600",
        "toolResponseMaxBytes": "65536",
        "conformance": "False",
        "maxPollWaitSeconds": "10",
        "apiKeyPepperMaxAgeSeconds": "300",
        "hostName": "acme-host",
        "buildId": "abc123",
        "modelProviders": "bedrock, openai",
        "modelPrices": '{"m": {"input": 1, "output": 2}}',
        "openaiBaseUrl": "https://llm.example.com/v1",
        "modelCallAttempts": "2",
        "judgeProvider": "bedrock",
        "judgeModel": "judge-model",
        "webhookRetryBaseSeconds": "5",
        "webhookRetryCapSeconds": "60",
        "webhookRotationOverlapSeconds": "3600",
        "webhookDeadLetterDays": "7",
        "executionMaxTasks": "500",
        "evalFinishPageTrials": "400",
        "evalTrialsPerBatch": "10",
        "tenantWriteRate": "7",
        "tenantWriteBurst": "9",
        "tenantMaxRunsInFlight": "12",
        "tenantMaxHeldRequests": "6",
        "tracingEndpoint": "http://localhost:4318/v1/traces",
        "tracingCaptureContent": "False",
        "conformanceSeams": "True",
        "startSweepGraceSeconds": "90",
        "webhookSubscriptionCacheSeconds": "5",
    }
    expected = {
        "HTTP_ALLOWLIST": "api.example.com,hooks.example.com:8443",
        "RUN_TOOL_CALL_BUDGET": "50",
        "SESSION_TTL_SECONDS": "600",
        "TOOL_RESPONSE_MAX_BYTES": "65536",
        "OPENWOP_CONFORMANCE": "false",
        "MAX_POLL_WAIT_SECONDS": "10",
        "APIKEY_PEPPER_MAX_AGE_SECONDS": "300",
        "HOST_NAME": "acme-host",
        "BUILD_ID": "abc123",
        "MODEL_PROVIDERS": "bedrock,openai",
        "MODEL_PRICES": '{"m": {"input": 1, "output": 2}}',
        "OPENAI_BASE_URL": "https://llm.example.com/v1",
        "MODEL_CALL_ATTEMPTS": "2",
        "JUDGE_PROVIDER": "bedrock",
        "JUDGE_MODEL": "judge-model",
        "WEBHOOK_RETRY_BASE_SECONDS": "5",
        "WEBHOOK_RETRY_CAP_SECONDS": "60",
        "WEBHOOK_ROTATION_OVERLAP_SECONDS": "3600",
        "WEBHOOK_DEAD_LETTER_DAYS": "7",
        "EXECUTION_MAX_TASKS": "500",
        "EVAL_FINISH_PAGE_TRIALS": "400",
        "EVAL_TRIALS_PER_BATCH": "10",
        "TENANT_WRITE_RATE": "7",
        "TENANT_WRITE_BURST": "9",
        "TENANT_MAX_RUNS_IN_FLIGHT": "12",
        "TENANT_MAX_HELD_REQUESTS": "6",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://localhost:4318/v1/traces",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false",
        "OPENWOP_CONFORMANCE_SEAMS": "true",
        "START_SWEEP_GRACE_SECONDS": "90",
        "WEBHOOK_SUBSCRIPTION_CACHE_SECONDS": "5",
    }
    assert {s.context for s in RUNTIME_SETTINGS} == set(given) and {s.env_var for s in RUNTIME_SETTINGS} == set(
        expected
    )
    _, stack = build_app(
        {
            "stage": "qa",
            "seed": "conformance,demo",
            "seedTenants": "acme, globex",
            "demoToolsUrl": "https://tools.example.com",
            "demoMcpUrl": "https://mcp.example.com/mcp",
            "tracingLayerArn": COLLECTOR_LAYER,
            **given,
        },
        outdir=str(tmp_path),
        nag=True,
    )
    template = synthesize(stack).to_json()
    resources = template["Resources"]
    # Then every function's environment carries each setting as the code reads it
    for spec in manifest.FUNCTIONS:
        fn_id = stack.resolve(stack.functions.function(spec.name).node.default_child.ref)["Ref"]
        env = resources[fn_id]["Properties"]["Environment"]["Variables"]
        assert {k: env.get(k) for k in expected} == expected, spec.name
        # and the collector layer from context rides beside the dependencies layer
        layers = resources[fn_id]["Properties"]["Layers"]
        assert len(layers) == 2 and layers[1] == COLLECTOR_LAYER, spec.name
    # and one seed resource is served by the seed_host function, with the plan and the fixtures' digest
    (seed,) = [r for r in resources.values() if r["Type"] == "Custom::OpenWopSeed"]
    seed_fn = stack.resolve(stack.functions.function("seed_host").node.default_child.ref)["Ref"]
    assert seed["Properties"] == {
        "ServiceToken": {"Fn::GetAtt": [seed_fn, "Arn"]},
        "Stage": "qa",
        "Sets": "conformance,demo",
        "Tenants": "acme,globex",
        "DemoToolsUrl": "https://tools.example.com",
        "DemoMcpUrl": "https://mcp.example.com/mcp",
        "FixturesDigest": fixtures_digest(),
    }
    # and the seed function may write only the host table, and the runs and events tables for the audit run of the
    # demo MCP server's registration (its negotiation.decided: docs/decisions/0136)
    statements = [
        s
        for p in resources.values()
        if p["Type"] == "AWS::IAM::Policy"
        and {"Ref": resources[seed_fn]["Properties"]["Role"]["Fn::GetAtt"][0]} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    tables = {
        json.dumps(r)
        for s in statements
        if any(str(a).startswith("dynamodb:") for a in _as_list(s["Action"]))
        for r in _as_list(s["Resource"])
    }
    allowed = [
        json.dumps(stack.resolve(stack.tables.table(t).table_arn))
        for t in (manifest.HOST, manifest.RUNS, manifest.EVENTS)
    ]
    assert tables and all(any(a in t for a in allowed) for t in tables)
    assert all(any(a in t for t in tables) for a in allowed)


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"stage": "prod", "seed": "conformance"}, "seeding is refused in the prod stage"),
        ({"stage": "qa", "seed": "demo"}, "the demo needs tenants"),
        ({"stage": "qa", "seed": "fixtures"}, "unknown seed set fixtures"),
        ({"stage": "qa", "runToolCallBudget": "lots"}, "context runToolCallBudget='lots': expected a non-negative"),
        ({"stage": "qa", "conformance": "yes"}, "context conformance='yes': expected true or false"),
        ({"stage": "qa", "conformanceSeams": "on"}, "context conformanceSeams='on': expected true or false"),
        ({"stage": "prod", "conformanceSeams": "true"}, "conformanceSeams is refused in the prod stage"),
        ({"stage": "qa", "detailedAlarms": "yes"}, "context detailedAlarms='yes': expected true or false"),
        ({"stage": "qa", "dashboard": "on"}, "context dashboard='on': expected true or false"),
        ({"stage": "qa", "canaryErrorRatePercent": "0"}, "context canaryErrorRatePercent='0': expected a percentage"),
        ({"stage": "qa", "canaryErrorRatePercent": "much"}, "context canaryErrorRatePercent='much': expected a"),
        ({"stage": "qa", "canaryMinInvocations": "0"}, "context canaryMinInvocations='0': expected a positive integer"),
    ],
)
def test_context_that_cannot_be_deployed_fails_synthesis_with_one_line(
    tmp_path: Path, context: dict[str, str], message: str
) -> None:
    from infra.app import build_app

    # When the stack is synthesized with context it cannot honour
    with pytest.raises(ValueError) as exc:
        build_app(context, outdir=str(tmp_path), nag=False)
    # Then synthesis stops with one line that says why
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


def test_every_setting_the_code_reads_is_set_by_the_stack_or_from_context() -> None:
    from infra.constructs.runtime_settings import OTHER_CONTEXT, RUNTIME_SETTINGS, STACK_DERIVED
    from shared import settings

    # Given the env vars shared/settings.py reads
    source = (ROOT / "shared" / "settings.py").read_text()
    read = set(re.findall(r'_env\("([A-Z0-9_]+)"', source))
    # Then each is a resource the stack wires, an operator setting from CDK context, or fixed by the manifest
    from_context = {s.env_var for s in RUNTIME_SETTINGS} | set(OTHER_CONTEXT.values()) | set(STACK_DERIVED)
    wired = set(settings.resource_env_vars())
    assert read - from_context - wired == set()


def test_the_dashboard_shows_evals_fixture_misses_tool_calls_and_refusal_codes(synth_opted_in: Synth) -> None:
    # Given the dashboard's body (a join of literal JSON and tokens)
    (dashboard,) = synth_opted_in.of_type("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    # Then the eval counters and the dimensioned counters (searched by their dimensions) are on it
    for name in ("EvalsStarted", "EvalsFinished", "FixtureMisses"):
        assert name in body, name
    assert f"SEARCH('{{OpenWOP/{STAGE},service,transport,status,source}} MetricName=" in body
    assert "ToolCalls" in body
    assert f"SEARCH('{{OpenWOP/{STAGE},service,code}} MetricName=" in body and "RefusalsByCode" in body


def test_idle_cost_inventory_of_the_bench_matches_the_template(synth: Synth, synth_opted_in: Synth) -> None:
    """The bench prices the stack's idle month from ``shared.manifest`` (``bench.costs``), by default and opted in;
    each synthesized template must hold exactly that inventory, and nothing always-on (NAT, instances, provisioned
    capacity) or priced per key."""
    from bench.costs import idle_dollars_per_month, idle_inventory_from_manifest, idle_inventory_from_template
    from bench.prices import KMS_PER_CUSTOMER_KEY_MONTH, SECRETS_PER_SECRET_MONTH

    # Given the synthesized templates, default and with detailedAlarms and dashboard
    counted = idle_inventory_from_template(synth.template.to_json())
    opted_in = idle_inventory_from_template(synth_opted_in.template.to_json())
    # Then their billable-per-month resources are the ones the bench prices, and none is always-on compute
    assert counted == idle_inventory_from_manifest()
    assert opted_in == idle_inventory_from_manifest(detailed=True, dashboard=True)
    assert counted["always_on"] == opted_in["always_on"] == 0 and counted["secrets"] == len(manifest.SECRETS) > 0
    assert counted["kms_keys"] == opted_in["kms_keys"] == len(manifest.KEYS) == 1 and counted["dashboards"] == 0
    assert opted_in["alarm_metrics"] > counted["alarm_metrics"] and opted_in["dashboards"] == 1
    # and by default, within CloudWatch's free tier, the secrets and the signing key are the whole idle month
    free = idle_dollars_per_month(counted, free_tier=True)
    assert sum(free.values()) == pytest.approx(
        len(manifest.SECRETS) * SECRETS_PER_SECRET_MONTH
        + len(manifest.KEYS) * KMS_PER_CUSTOMER_KEY_MONTH
        + (counted["alarm_metrics"] - 10) * 0.10
    )
    # and the counter can see always-on resources and keys: a provisioned table, a NAT gateway, a KMS key
    fake = {
        "Resources": {
            "K": {"Type": "AWS::KMS::Key"},
            "N": {"Type": "AWS::EC2::NatGateway"},
            "T": {"Type": "AWS::DynamoDB::GlobalTable", "Properties": {"BillingMode": "PROVISIONED"}},
        }
    }
    got = idle_inventory_from_template(fake)
    assert (got["always_on"], got["kms_keys"]) == (2, 1)


# --- Webhook queues ---------------------------------------------------------------------------------------------


def test_webhook_queue_and_dlq_are_fifo_sqs_encrypted_tls_only_with_a_redrive(synth: Synth) -> None:
    queues = synth.of_type("AWS::SQS::Queue")
    for spec in manifest.QUEUES:
        main = queues[synth.logical_id(synth.stack.queues.queues[spec.key])]["Properties"]
        dlq_id = synth.logical_id(synth.stack.queues.dead_letter_queues[spec.key])
        dlq = queues[dlq_id]["Properties"]
        # Then both are FIFO and encrypted with SQS-managed keys (no customer key, nothing billed while idle)
        assert main["FifoQueue"] is True and dlq["FifoQueue"] is True
        assert main["SqsManagedSseEnabled"] is True and dlq["SqsManagedSseEnabled"] is True
        assert "KmsMasterKeyId" not in main and "KmsMasterKeyId" not in dlq
        # and the main queue redrives to the DLQ after the manifest's attempts
        assert main["RedrivePolicy"] == {
            "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
            "maxReceiveCount": spec.max_receives,
        }
        consumer = next(f for f in manifest.FUNCTIONS if f.consumes == spec.key)
        assert main["VisibilityTimeout"] >= 6 * consumer.timeout_s
    # and every queue refuses requests without TLS
    policies = json.dumps(synth.of_type("AWS::SQS::QueuePolicy"))
    for qid in queues:
        assert qid in policies
    assert '"aws:SecureTransport": "false"' in policies
    # and the stack's one customer managed key is the webhook signing key: only the functions the manifest names may
    # use it, for exactly their access (the queues never do; tests/infra/test_signing_secrets.py has who reads what)
    assert list(synth.of_type("AWS::KMS::Key")) == [synth.logical_id(synth.stack.secrets.key(manifest.SIGNING))]
    # (write+replay: Encrypt, and a Decrypt held to the replay context: test_signing_secrets checks the condition)
    wanted = {
        "read": {"kms:Decrypt"},
        "write": {"kms:Encrypt"},
        "readwrite": {"kms:Encrypt", "kms:Decrypt"},
        "write+replay": {"kms:Encrypt", "kms:Decrypt"},
    }
    for spec in manifest.FUNCTIONS:
        kms = {a for a in _actions(synth.function_statements(spec.name)) if a.startswith("kms:")}
        assert kms == set().union(*(wanted[access] for _, access in spec.keys)), spec.name


def test_only_the_fanout_sends_and_only_the_delivery_function_consumes(synth: Synth) -> None:
    webhook_queue = synth.resolve(synth.stack.queues.queues[manifest.WEBHOOKS].queue_arn)
    for spec in manifest.FUNCTIONS:
        on_queue = [st for st in synth.function_statements(spec.name) if webhook_queue in _as_list(st["Resource"])]
        sends = any(a.startswith("sqs:SendMessage") for a in _actions(on_queue))
        receives = any(a.startswith("sqs:ReceiveMessage") for a in _actions(on_queue))
        assert sends == bool(spec.sends), spec.name
        assert receives == (spec.consumes is not None), spec.name
    # and the delivery function is invoked with one message per batch, reporting partial failures
    (mapping,) = [
        m["Properties"]
        for m in synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if "StartingPosition" not in m["Properties"]
    ]
    assert synth.names_alias(mapping["FunctionName"], "deliver_webhooks")
    assert mapping["BatchSize"] == 1 and mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_webhook_dead_letters_are_alarmed(synth: Synth) -> None:
    alarms = synth.of_type("AWS::CloudWatch::Alarm")
    mon = synth.stack.monitoring.alarms
    props = alarms[synth.logical_id(mon["WebhooksDeadLetters"])]["Properties"]
    assert props["MetricName"] == "ApproximateNumberOfMessagesVisible" and props["Threshold"] == 1
    dlq = synth.stack.queues.dead_letter_queues[manifest.WEBHOOKS]
    assert props["Dimensions"][0]["Value"] == synth.resolve(dlq.queue_name)
