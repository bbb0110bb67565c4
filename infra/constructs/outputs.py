"""Stack outputs: where the operator CLI (``--stack NAME``) and people find this stack's resources.

One output per runtime resource env var (``shared.settings.resource_env_vars``), keyed ``output_key(var)``
(``RUNS_TABLE`` -> ``RunsTableName``), with the value CDK gives the functions, plus ``ApiUrl``. Outputs are created on
the stack itself so their keys are exactly these names (no construct-path hash). The same values are SSM parameters
``/openwop-serverless/<stage>/<OutputKey>``, for other stacks and tools that read Parameter Store.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ssm as ssm

from infra.constructs.api import RunsApi
from infra.constructs.fixtures_bucket import FixturesBucket
from infra.constructs.functions import credentials_prefix
from infra.constructs.queues import HostQueues
from infra.constructs.secrets import HostSecrets
from infra.constructs.state_machines import HostStateMachines
from infra.constructs.tables import HostTables
from shared import manifest, settings


def add_outputs(
    stack: Stack,
    *,
    stage: str,
    tables: HostTables,
    fixtures: FixturesBucket,
    secrets: HostSecrets,
    state_machines: HostStateMachines,
    api: RunsApi,
    queues: HostQueues,
) -> dict[str, CfnOutput]:
    values: dict[str, str] = {}
    for t in manifest.TABLES:
        values[t.env_var] = tables.table(t.key).table_name
    for b in manifest.BUCKETS:
        values[b.env_var] = fixtures.bucket.bucket_name
    for m in manifest.STATE_MACHINES:
        values[m.env_var] = state_machines.machine(m.key).state_machine_arn
    for s in manifest.SECRETS:
        values[s.env_var] = secrets.secret(s.key).secret_arn
    for q in manifest.QUEUES:
        values[q.env_var] = queues.queues[q.key].queue_url
    for k in manifest.KEYS:
        values[k.env_var] = secrets.key(k.key).key_arn
    values[settings.CREDENTIALS_PREFIX_VAR] = credentials_prefix(stage)
    missing = set(settings.resource_env_vars()) - set(values)
    if missing:
        raise ValueError(f"no stack output value for {sorted(missing)}")
    outputs = {
        settings.output_key(var): CfnOutput(
            stack, settings.output_key(var), value=value, description=f"{var} of the OpenWOP host functions"
        )
        for var, value in values.items()
    }
    outputs[settings.API_URL_OUTPUT] = CfnOutput(
        stack, settings.API_URL_OUTPUT, value=api.http_api.api_endpoint, description="Base URL of the OpenWOP host"
    )
    values[settings.API_URL_OUTPUT] = api.http_api.api_endpoint
    for var, value in values.items():
        key = settings.output_key(var) if var != settings.API_URL_OUTPUT else var
        ssm.StringParameter(
            stack,
            f"{key}Parameter",
            parameter_name=parameter_name(stage, key),
            string_value=value,
            description=f"OpenWOP host ({stage}): {key}",
        )
    return outputs


def parameter_name(stage: str, output_key: str) -> str:
    return f"/openwop-serverless/{stage}/{output_key}"
