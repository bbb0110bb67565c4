"""The operator CLI against a deployed stack (``--stack NAME --region R``): resources found through the stack's
CloudFormation outputs (DescribeStacks), and one-line errors (no traceback) when region, credentials or stack are
missing.

The "deployed stack" is a CloudFormation stack in the embedded moto whose outputs name the local resources, as the
real stack's outputs name its own (tests/infra checks those outputs); nothing leaves loopback.
"""

from __future__ import annotations

import json
import warnings

import pytest

from tests.helpers import unique

REGION = "us-east-1"
AWS_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
)


def _deploy_outputs(host, outputs: dict[str, str]) -> str:
    name = unique("OpenWopHost-test")
    template = {
        "Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {k: {"Value": v} for k, v in outputs.items()},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # moto does not model the placeholder resource; outputs are what matter
        host.aws.client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))
    return name


def _local_outputs() -> dict[str, str]:
    from shared import settings
    from shared.local.environment import resource_env

    env = {**resource_env(), settings.CREDENTIALS_PREFIX_VAR: "openwop-serverless/test/credentials"}
    return {settings.output_key(var): env[var] for var in settings.resource_env_vars()}


@pytest.fixture()
def restore_env(monkeypatch):
    """Whatever --stack exports is undone after the test (the session's local resources stay in place)."""
    import os

    from shared import settings

    for var in (*settings.resource_env_vars(), *AWS_ENV):
        if var in os.environ:
            monkeypatch.setenv(var, os.environ[var])
        else:
            monkeypatch.delenv(var, raising=False)
    yield monkeypatch
    settings.get_settings.cache_clear()


def test_keys_create_with_stack_reads_the_outputs_and_writes_that_stacks_tables(host, capsys, restore_env):
    from shared.local.commands import main
    from shared.services import auth
    from shared.wiring import get_ports

    # Given a deployed stack whose outputs locate the host's resources
    stack = _deploy_outputs(host, _local_outputs())
    tenant = unique("tenant-stack")
    # When the operator creates and lists a key through --stack
    assert main(["keys", "create", "--tenant", tenant, "--stack", stack, "--region", REGION]) == 0
    created = json.loads(capsys.readouterr().out)
    assert main(["keys", "list", "--tenant", tenant, "--stack", stack, "--region", REGION]) == 0
    # Then the key exists in that stack's host table and authenticates
    assert json.loads(capsys.readouterr().out)["keyId"] == created["keyId"]
    assert auth.resolve_caller(get_ports(), f"Bearer {created['apiKey']}").tenant == tenant


def test_a_stack_missing_an_output_is_a_one_line_error(host, capsys, restore_env):
    from shared.local.commands import main

    # Given a stack of an older version, without the pepper secret's output
    outputs = _local_outputs()
    del outputs["PepperSecretId"]
    stack = _deploy_outputs(host, outputs)
    # Then the command names the missing output and exits 1
    assert main(["keys", "list", "--tenant", "t", "--stack", stack, "--region", REGION]) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"error: stack {stack} has no output PepperSecretId (deployed from an older version?)"


def test_an_unknown_stack_is_a_one_line_error(host, capsys, restore_env):
    from shared.local.commands import main

    # When the stack does not exist
    assert main(["keys", "list", "--tenant", "t", "--stack", "OpenWopHost-nope", "--region", REGION]) == 1
    # Then one line says so, with the region
    err = capsys.readouterr().err
    assert err.strip() == f"error: stack OpenWopHost-nope does not exist in region {REGION}"
    assert "Traceback" not in err


def test_missing_credentials_or_region_are_one_line_errors(tmp_path):
    import os
    import subprocess
    import sys

    # Given an environment with no AWS credentials anywhere (files, env, instance metadata disabled): the command runs
    # in a process of its own, so this process's environment (what the embedded stack's clients, built lazily on
    # other threads, read their credentials from) never loses its credentials
    env = {k: v for k, v in os.environ.items() if k not in (*AWS_ENV, "AWS_ENDPOINT_URL")}
    env.pop("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", None)
    env.pop("AWS_CONTAINER_CREDENTIALS_FULL_URI", None)
    env |= {
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "shared.local.commands", "keys", "list", "--tenant", "t", *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60, check=False)

    # When no region is given
    out = cli("--stack", "OpenWopHost-prod")
    assert out.returncode == 1 and out.stderr.strip() == "error: no AWS region: pass --region or set AWS_REGION"
    # When a region is given but there are no credentials
    out = cli("--stack", "OpenWopHost-prod", "--region", REGION)
    assert out.returncode == 1 and out.stderr.strip().startswith("error: no AWS credentials found")
    assert "Traceback" not in out.stderr


def test_cloudformation_refusals_become_one_line_reasons():
    from botocore.session import get_session
    from botocore.stub import Stubber

    from shared.deployment.cloudformation import CloudFormationStackOutputs
    from shared.ports import StackLookupError

    # Given CloudFormation answering AccessDenied, then a stack with outputs (at the API boundary: Stubber)
    client = get_session().create_client(
        "cloudformation", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )
    stub = Stubber(client)
    stub.add_client_error("describe_stacks", "AccessDenied", "User is not authorized", 403)
    stub.add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "S",
                    "CreationTime": "2026-01-01T00:00:00Z",
                    "StackStatus": "CREATE_COMPLETE",
                    "Outputs": [{"OutputKey": "RunsTable", "OutputValue": "t-runs"}],
                }
            ]
        },
        {"StackName": "S"},
    )
    port = CloudFormationStackOutputs(lambda: client, REGION)
    with stub:
        # Then a refusal names the operation and code only
        with pytest.raises(StackLookupError) as err:
            port.read_outputs("S")
        assert err.value.reason == "CloudFormation refused DescribeStacks on S: AccessDenied"
        # and outputs come back as a plain mapping
        assert port.read_outputs("S") == {"RunsTable": "t-runs"}
