"""The Lambda functions of the resource manifest: one asset, one dependencies layer, least-privilege roles."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.constructs.common import acknowledge, log_retention, nag_reference, pascal, removal_policy
from infra.constructs.concurrency import reserved_concurrency
from infra.constructs.fixtures_bucket import FixturesBucket
from infra.constructs.runtime_settings import runtime_environment
from infra.constructs.secrets import HostSecrets
from infra.constructs.tables import HostTables
from infra.packaging import AssetDirs, code_fingerprint
from infra.runtimes import LAMBDA_PYTHON, LAMBDA_RUNTIME
from shared import manifest

RUNTIME: lambda_.Runtime = getattr(lambda_.Runtime, f"PYTHON_{LAMBDA_PYTHON[0]}_{LAMBDA_PYTHON[1]}")
ARCHITECTURE = lambda_.Architecture.ARM_64
SERVICE_NAME = "openwop-serverless"
ALIAS_NAME = "live"  # what every caller invokes: API routes, state machines, event sources (never $LATEST)


_BUCKET_ACTION_WILDCARDS: dict[manifest.Access, tuple[str, ...]] = {
    "read": ("s3:GetObject*", "s3:GetBucket*", "s3:List*"),
    "write": ("s3:DeleteObject*", "s3:Abort*"),
    "readwrite": ("s3:GetObject*", "s3:GetBucket*", "s3:List*", "s3:DeleteObject*", "s3:Abort*"),
}


def _grant_table(spec: manifest.Table, table: dynamodb.TableV2, role: iam.Role, access: manifest.Access) -> None:
    if access == "read":
        table.grant_read_data(role)
    elif access == "write":
        table.grant_write_data(role)
    else:
        table.grant_read_write_data(role)
    if spec.indexes:
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{nag_reference(role, table, 'Arn')}/index/*]",
            f"The manifest grants {access} access to the {spec.key} table including its GSIs "
            f"({', '.join(i.name for i in spec.indexes)}); "
            "CDK's grant_*_data scopes that to <table ARN>/index/* of this one table.",
        )


def _grant_bucket(fixtures: FixturesBucket, role: iam.Role, access: manifest.Access) -> None:
    bucket = fixtures.bucket
    if access == "read":
        bucket.grant_read(role)
    elif access == "write":
        bucket.grant_write(role)
    else:
        bucket.grant_read_write(role)
    for action in _BUCKET_ACTION_WILDCARDS[access]:
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Action::{action}]",
            f"CDK's Bucket.grant_* action group for the declared {access} access, limited to the fixtures "
            "bucket and its objects.",
        )
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::{nag_reference(role, bucket, 'Arn')}/*]",
        "Fixture copies are written under per-run keys that only exist at run time; access is limited to "
        "objects of the fixtures bucket.",
    )


class HostFunctions(Construct):
    """One ``aws_lambda.Function`` per ``manifest.FUNCTIONS`` entry (python3.13, arm64), published as a version
    behind the alias ``live``.

    Each function gets its own role and log group; the role holds exactly the grants its manifest entry declares
    (tables and their indexes, the fixtures bucket, the state machines it starts) plus writing to its log group.
    Every deploy that changes a function publishes a new version; callers only ever invoke the alias, which
    CodeDeploy moves to the new version (``infra/constructs/deployments.py``: a canary that rolls back on alarms).
    The run-advancing tasks and the long polls have reserved concurrency (``infra/constructs/concurrency.py``).
    Construct ids are ``<Name>Function`` / ``<Name>Live`` / ``<Name>Role`` / ``<Name>Logs`` (``CreateRunFunction``).

    The functions live in nested stacks by area (``FUNCTION_GROUPS``: the run tasks, the API handlers, the stream,
    queue and setup workers): ``homes`` maps each group to the construct its functions are made under
    (docs/decisions/0148-nested-stacks.md). The dependencies layer stays here, in the root stack.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        assets: AssetDirs,
        tables: HostTables,
        fixtures: FixturesBucket,
        secrets: HostSecrets,
        retention_days: int,
        homes: Mapping[str, Construct] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._secrets = secrets
        self._homes: Mapping[str, Construct] = homes or {}
        # CDK context ``metricsNamespace`` (default OpenWOP/<stage>): where the functions' EMF metrics land.
        self.metrics_namespace = str(self.node.try_get_context("metricsNamespace") or f"OpenWOP/{stage}")
        self._functions: dict[str, lambda_.Function] = {}
        self._aliases: dict[str, lambda_.Alias] = {}
        self._roles: dict[str, iam.Role] = {}
        self.reserved = reserved_concurrency(self)
        # CDK context ``buildId`` names the build (e.g. a commit); by default the code asset's content hash. Every run
        # records the build that started it (shared/engine/version.py), and discovery reports it.
        self.build_id = str(self.node.try_get_context("buildId") or code_fingerprint(assets.code))
        codes: dict[str, lambda_.Code] = {}  # one asset per stack: CDK binds an asset to one stack
        self.layer = lambda_.LayerVersion(
            self,
            "DependenciesLayer",
            code=lambda_.Code.from_asset(str(assets.layer)),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description="Runtime dependencies of the OpenWOP host (pyproject.toml without boto3/botocore)",
        )
        # CDK context ``tracingLayerArn``: an OpenTelemetry collector extension layer (the ADOT collector's) added to
        # every function, so the spans sent to ``tracingEndpoint`` (http://localhost:4318/v1/traces) reach X-Ray or
        # the backend its configuration names (docs/operations.md, "Spans").
        collector = self.node.try_get_context("tracingLayerArn")
        self.layers = [self.layer] + (
            [lambda_.LayerVersion.from_layer_version_arn(self, "TracingCollectorLayer", str(collector))]
            if collector
            else []
        )
        for spec in manifest.FUNCTIONS:
            home = self.home(spec.name)
            code = codes.setdefault(Stack.of(home).node.path, lambda_.Code.from_asset(str(assets.code)))
            fn = self._functions[spec.name] = self._function(spec, stage, code, tables, fixtures, retention_days)
            self._aliases[spec.name] = lambda_.Alias(
                home,
                f"{pascal(spec.name)}Live",
                alias_name=ALIAS_NAME,
                version=fn.current_version,
                description=f"what callers of {spec.name} invoke",
            )
        # The agent gateway's function URL (decision 0143, "On AWS"), handed to the functions that build its URLs
        self.urls = {spec.name: self._url(spec.name) for spec in manifest.FUNCTIONS if spec.url}
        for spec in manifest.FUNCTIONS:
            if spec.gateway_url and GATEWAY in self.urls:
                self._functions[spec.name].add_environment(GATEWAY_URL_ENV, self.urls[GATEWAY].url)

    def _function(
        self,
        spec: manifest.Function,
        stage: str,
        code: lambda_.Code,
        tables: HostTables,
        fixtures: FixturesBucket,
        retention_days: int,
    ) -> lambda_.Function:
        name = pascal(spec.name)
        home = self.home(spec.name)
        log_group = logs.LogGroup(
            home, f"{name}Logs", retention=log_retention(stage), removal_policy=removal_policy(stage)
        )
        role = iam.Role(
            home,
            f"{name}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"OpenWOP {spec.name}: only the grants its manifest entry declares",
        )
        environment = self._environment(spec, stage, tables, fixtures, retention_days)
        fn = lambda_.Function(
            home,
            f"{name}Function",
            description=f"OpenWOP {spec.kind} {spec.name}",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=f"{spec.module}.lambda_handler",
            code=code,
            layers=self.layers,
            memory_size=spec.memory_mb,
            timeout=Duration.seconds(spec.timeout_s),
            role=role,
            log_group=log_group,
            environment=environment,
            tracing=lambda_.Tracing.ACTIVE,
            reserved_concurrent_executions=self.reserved.get(spec.name),
        )
        self._roles[spec.name] = role
        log_group.grant_write(role)
        self._grant(spec, stage, role, tables, fixtures)
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "Active X-Ray tracing: xray:PutTraceSegments and xray:PutTelemetryRecords do not support resource-level "
            "permissions (CDK adds them for Tracing.ACTIVE).",
        )
        acknowledge(
            fn,
            "Serverless-LambdaDLQ",
            f"{spec.name} is invoked asynchronously only by its EventBridge schedule, whose ticks carry nothing: a "
            "failed one is made up by the next, and a dead-letter target would hold only stale ticks."
            if spec.kind == "schedule"
            else f"{spec.name} is never invoked asynchronously: API Gateway and Step Functions invoke it synchronously "
            "(and retry), stream and queue event source mappings keep their own on-failure queue or redrive, and "
            "CloudFormation waits on the seed custom resource; an async dead-letter target would never receive a "
            "message.",
        )
        for rule in ("AwsSolutions-L1", "Serverless-LambdaLatestVersion"):
            acknowledge(
                fn,
                rule,
                f"{LAMBDA_RUNTIME.name} ({LAMBDA_RUNTIME.os}) is pinned on purpose: supported by Lambda until "
                f"{LAMBDA_RUNTIME.deprecated.isoformat()} (infra/runtimes.py; a test fails once a function's runtime "
                "is past its date), the version the layer's wheels and the assets' byte code are built for, and "
                "the newest the dependencies are tested on.",
            )
        return fn

    def _environment(
        self, spec: manifest.Function, stage: str, tables: HostTables, fixtures: FixturesBucket, retention_days: int
    ) -> dict[str, str]:
        """The function's environment: the runtime settings, then the resources its manifest entry names."""
        environment = {
            "RETENTION_DAYS": str(retention_days),
            # the stage names the deployment; ``prod`` never serves mock model providers
            # (docs/decisions/0065-no-mocks-in-prod.md)
            "STAGE": stage,
            "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
            "POWERTOOLS_TRACER_CAPTURE_RESPONSE": "false",
            # we install no pydantic plugins: skip their entry-point scan (~25 ms of the first body a function checks)
            "PYDANTIC_DISABLE_PLUGINS": "__all__",
            "METRICS_NAMESPACE": self.metrics_namespace,
            # CDK context ``evalMaxConcurrency``: trials of one eval run in flight at once (the Map's concurrency).
            "EVAL_MAX_CONCURRENCY": str(self.node.try_get_context("evalMaxConcurrency") or 4),
            # CDK context ``runStartsPerMinute``: run starts per tenant and minute (0: no quota).
            "RUN_STARTS_PER_MINUTE": str(self.node.try_get_context("runStartsPerMinute") or 0),
            # CDK context for the other runtime settings (httpAllowlist, runToolCallBudget, conformance, ...)
            **runtime_environment(self),
            "BUILD_ID": self.build_id,
        }
        if spec.name == "poll_run_events" and int(environment.get("MAX_POLL_WAIT_SECONDS", "25")) > spec.timeout_s - 5:
            # the hold is bounded by the function: a poll must answer before its Lambda times out (then a 5xx)
            raise ValueError(
                f"context maxPollWaitSeconds={environment['MAX_POLL_WAIT_SECONDS']}: at most "
                f"{spec.timeout_s - 5} (the long poll's function timeout less 5 s)"
            )
        for key, _access in spec.tables:
            environment[manifest.table(key).env_var] = tables.table(key).table_name
        if spec.bucket is not None:
            environment[_bucket_spec().env_var] = fixtures.bucket.bucket_name
        for key in manifest.secrets_of(spec):
            environment[_secret_spec(key).env_var] = self._secrets.secret(key).secret_arn
        for key, _access in spec.keys:
            environment[manifest.kms_key(key).env_var] = self._secrets.key(key).key_arn
        if spec.credentials is not None:
            environment["CREDENTIALS_SECRET_PREFIX"] = credentials_prefix(stage)
        if spec.egress:
            # CDK context ``egressAllow``: CIDRs or host names tools may reach although private (default: none).
            environment["EGRESS_ALLOW"] = str(self.node.try_get_context("egressAllow") or "")
        return environment

    def _grant(
        self, spec: manifest.Function, stage: str, role: iam.Role, tables: HostTables, fixtures: FixturesBucket
    ) -> None:
        """The grants the function's manifest entry declares: tables, bucket, secrets, keys, credentials, models."""
        for key, access in spec.tables:
            _grant_table(manifest.table(key), tables.table(key), role, access)
        if spec.bucket is not None:
            _grant_bucket(fixtures, role, spec.bucket)
        for key in manifest.secrets_of(spec):
            self._secrets.secret(key).grant_read(role)
        for key, access in spec.keys:
            self._grant_key(role, key, access)
        if spec.credentials is not None:
            self._grant_credentials(role, stage, spec.credentials)
        if spec.models:
            self._grant_models(role)

    def _grant_key(self, role: iam.Role, key: str, access: str) -> None:
        # Encrypt alone for write (CDK's grant_encrypt adds ReEncrypt*, which can open a value), Decrypt for read
        actions = {
            "read": ["kms:Decrypt"],
            "write": ["kms:Encrypt"],
            "readwrite": ["kms:Encrypt", "kms:Decrypt"],
            "write+replay": ["kms:Encrypt"],
        }
        self._secrets.key(key).grant(role, *actions[access])
        if access == "write+replay":  # Decrypt only of values sealed for an idempotent replay
            name, value = manifest.REPLAY_CONTEXT
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["kms:Decrypt"],
                    resources=[self._secrets.key(key).key_arn],
                    conditions={"StringEquals": {f"kms:EncryptionContext:{name}": value}},
                )
            )

    def _url(self, name: str) -> lambda_.FunctionUrl:
        """A public function URL on the ``live`` alias (so CodeDeploy's canary applies to it): ``AuthType NONE``, the
        handler's bearer-token check being the authorizer, and ``BUFFERED`` (Python has no native response
        streaming: an SSE answer is sent whole). No API Gateway in front: no 30 s cap, no request charge; the
        function's reserved concurrency bounds a flood (``infra/constructs/concurrency.py``)."""
        url = self._aliases[name].add_function_url(
            auth_type=lambda_.FunctionUrlAuthType.NONE, invoke_mode=lambda_.InvokeMode.BUFFERED
        )
        # cdk-nag's LambdaFunctionUrlAuth (in none of the AwsSolutions, Serverless, HIPAA, NIST or PCI packs of cdk-nag
        # 3.0.2) would flag AuthType NONE: acknowledged here, should a pack take it up.
        acknowledge(url, "LambdaFunctionUrlAuth", PUBLIC_URL_REASON)
        return url

    def _grant_models(self, role: iam.Role) -> None:
        """Bedrock Converse for model-backed agents: the foundation models and this account's inference profiles."""
        stack = Stack.of(self)
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["bedrock:InvokeModel"],
                resources=[
                    f"arn:{stack.partition}:bedrock:*::foundation-model/*",
                    f"arn:{stack.partition}:bedrock:*:{stack.account}:inference-profile/*",
                ],
            )
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:*::foundation-model/*]",
            "Agents name their model at registration (a tenant's choice at run time), so the role may invoke any "
            "foundation model; inference profiles are limited to this account. Only InvokeModel (Converse) is "
            "granted.",
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:*:<AWS::AccountId>:inference-profile/*]",
            "Cross-region inference profiles of this account, named by the agent's model binding at run time.",
        )

    def _grant_credentials(self, role: iam.Role, stage: str, access: manifest.Access) -> None:
        """Tenants' tool credentials: only secrets under this stage's credentials prefix (``<prefix>/<tenant>/<ref>``)."""
        actions = ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"]
        if access != "read":
            actions += ["secretsmanager:CreateSecret", "secretsmanager:PutSecretValue", "secretsmanager:DeleteSecret"]
        arn = Stack.of(self).format_arn(
            service="secretsmanager",
            resource="secret",
            resource_name=f"{credentials_prefix(stage)}/*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        role.add_to_principal_policy(iam.PolicyStatement(actions=actions, resources=[arn]))
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:"
            f"{credentials_prefix(stage)}/*]",
            "Tool credentials are created per tenant at run time (<prefix>/<tenant>/<credentialRef>); access is "
            "limited to this stage's credentials prefix, and the code addresses only the caller's tenant path.",
        )

    def connect_state_machines(self, machines: Mapping[str, sfn.StateMachine]) -> None:
        """Give each function that ``starts`` a state machine its ARN env var and start/stop/describe rights."""
        for spec in manifest.FUNCTIONS:
            fn = self._functions[spec.name]
            role = self._roles[spec.name]
            for key in spec.starts:
                machine = machines[key]
                sm_spec = next(m for m in manifest.STATE_MACHINES if m.key == key)
                fn.add_environment(sm_spec.env_var, machine.state_machine_arn)
                machine.grant_start_execution(role)
                executions = Stack.of(self).format_arn(
                    service="states",
                    resource="execution",
                    resource_name=f"{machine.state_machine_name}:*",
                    arn_format=ArnFormat.COLON_RESOURCE_NAME,
                )
                role.add_to_principal_policy(
                    iam.PolicyStatement(
                        actions=["states:StopExecution", "states:DescribeExecution"], resources=[executions]
                    )
                )
                acknowledge(
                    role,
                    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:"
                    f"execution:{nag_reference(role, machine, 'Name')}:*]",
                    "Execution ARNs are minted at each start; stop/describe is limited to the executions of this "
                    "one state machine (execution:<machine name>:*).",
                )
            for key in spec.continues:
                # StartExecution on the machine its task runs on, for continue-as-new; a policy of its own, as
                # below: the machine invokes this function, whose role's default policy it would otherwise wait on.
                self._own_policy(spec.name, role, f"Continues{pascal(key)}", ["states:StartExecution"], machines[key])
            for key in spec.resumes:
                # SendTaskSuccess/Failure/Heartbeat on this machine: ends a parked run's .waitForTaskToken wait
                if not spec.url:
                    machines[key].grant_task_response(role)
                    continue
                # The run tasks read this function's URL, and a function waits on its role's default policy: a grant
                # there would close a cycle (function -> policy -> machine -> its task -> the URL -> the function).
                # A policy of its own, which nothing waits on, holds it.
                actions = ["states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"]
                self._own_policy(spec.name, role, f"Resumes{pascal(key)}", actions, machines[key])

    def _own_policy(
        self, name: str, role: iam.IRole, what: str, actions: list[str], machine: sfn.IStateMachine
    ) -> None:
        """A policy of the function's role that nothing waits on (a grant in its default policy would close a cycle)."""
        statement = iam.PolicyStatement(actions=actions, resources=[machine.state_machine_arn])
        iam.Policy(self.home(name), f"{pascal(name)}{what}", roles=[role], statements=[statement])

    def home(self, name: str) -> Construct:
        """The construct a function's resources are made under: its group's home, or this construct."""
        return self._homes.get(function_group(manifest.function(name)), self)

    def function(self, name: str) -> lambda_.Function:
        return self._functions[name]

    def alias(self, name: str) -> lambda_.Alias:
        """The ``live`` alias of a function: what every caller invokes."""
        return self._aliases[name]

    def alias_arn(self, name: str) -> str:
        """The ``live`` alias's ARN spelled from the function's (``<function ARN>:live``), for the state machines:
        a reference to the alias resource closed a cycle while the machines' failed executions rolled deploys back
        (alias -> its CodeDeploy group -> that alarm -> the machine -> the alias); kept, so the machines never wait
        on an alias's deployment (docs/decisions/0155-canary-rollback-on-own-errors.md)."""
        return f"{self._functions[name].function_arn}:{ALIAS_NAME}"

    @property
    def aliases(self) -> dict[str, lambda_.Alias]:
        return dict(self._aliases)

    @property
    def functions(self) -> dict[str, lambda_.Function]:
        return dict(self._functions)


FUNCTION_GROUPS = ("tasks", "api", "workers")
GATEWAY = "agent_gateway"  # the function whose URL is GATEWAY_URL
GATEWAY_URL_ENV = "GATEWAY_URL"
PUBLIC_URL_REASON = (
    "The bearer token check in the handler is the authorizer: every request to the agent gateway's function URL "
    "carries a session's token (derived under the API-key pepper), checked in constant time before anything is read "
    "or called (decision 0143)."
)


def function_group(spec: manifest.Function) -> str:
    """The nested stack a function lives in: the run tasks (beside the state machines that invoke them), the API
    handlers, or the workers (stream and queue consumers, the seed function).

    A function served by a URL of its own lives in the root with the tasks (group ``tasks``): the URL is named from
    outside (an agent holds it), and the run tasks read it (``run_eval_trial``), which a nested stack's output could
    not give them without a cycle (the ``eval`` machine invokes the task, and the API handlers that start it take
    its ARN from the root)."""
    if spec.url:
        return "tasks"
    return {"task": "tasks", "api": "api"}.get(spec.kind, "workers")


def credentials_prefix(stage: str) -> str:
    return f"{SERVICE_NAME}/{stage}/credentials"


def _bucket_spec() -> manifest.Bucket:
    return next(b for b in manifest.BUCKETS if b.key == manifest.FIXTURES)


def _secret_spec(key: str) -> manifest.Secret:
    return next(s for s in manifest.SECRETS if s.key == key)
