"""Execution names (``shared.orchestration.step_functions.execution_name``): idempotent per run, purpose and
generation, within Step Functions' 80 characters, and never shared by two runs (issue 37: a run id cut to fit let
two long ids started in the same ~17 minutes share one execution)."""

from __future__ import annotations

import json
import re

from botocore.stub import Stubber

from shared.engine.stamps import execution_generation
from shared.orchestration.step_functions import StepFunctionsOrchestrator, execution_name

NAME = re.compile(r"^[A-Za-z0-9_.-]{1,80}$")
TENANT = "t" * 64  # the longest tenant a run id may carry


def test_a_short_run_id_keeps_its_readable_name() -> None:
    # Given a run id that fits, then its name is the run id with '/' spelled '--', the machine and the suffixes
    assert execution_name("tenant-a/01JABCDEFGHJKMNPQRSTVWXYZ0", "run") == "tenant-a--01JABCDEFGHJKMNPQRSTVWXYZ0-run"
    assert execution_name("tenant-a/01J", "run", generation=3, redelivery=True) == "tenant-a--01J-run-g3-r"
    # and its generation reads back from it, a redelivery's too (a chained task starts generation n + 1: 0191)
    assert execution_generation("tenant-a--01J-run-g3-r") == 3 == execution_generation("tenant-a--01J-run-g3")
    assert execution_generation("tenant-a--01J-run-r") == 0 == execution_generation("tenant-a--01J-run")


def test_two_long_run_ids_sharing_their_head_get_two_executions() -> None:
    # Given two runs of a 64-character tenant whose ULIDs share their time part (started in the same ~17 minutes)
    first, second = f"{TENANT}/01JABCDEFGHJKMNPQRSTVWXYZ0", f"{TENANT}/01JABCDEFGHJKMNPQRSTVWXYZ1"
    # When their executions are named, for every purpose and generation
    for machine in ("run", "fork", "eval"):
        for generation in (0, 1, 12):
            a = execution_name(first, machine, generation=generation)
            b = execution_name(second, machine, generation=generation)
            # Then the names differ, fit Step Functions' rules, are the same on every call and keep the generation
            assert a != b and NAME.match(a) and NAME.match(b) and len(a) == 80
            assert a == execution_name(first, machine, generation=generation)
            assert execution_generation(a) == generation
    # and a name keeps the head of the run id (here, the tenant)
    assert execution_name(first, "run").startswith(TENANT[:60])


def test_the_orchestrator_starts_the_named_execution() -> None:
    import boto3

    # Given the Step Functions client, stubbed at the wire (botocore's Stubber: the request is validated)
    client = boto3.client("stepfunctions", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:run"
    run_id = f"{TENANT}/01JABCDEFGHJKMNPQRSTVWXYZ0"
    name = execution_name(run_id, "run")
    with Stubber(client) as stub:
        stub.add_response(
            "start_execution",
            {"executionArn": machine.replace(":stateMachine:", ":execution:") + ":" + name, "startDate": 0},
            {"stateMachineArn": machine, "name": name, "input": json.dumps({"runId": run_id})},
        )
        # When the run's execution is started, then the request names it so
        arn = StepFunctionsOrchestrator(client, {"run": machine}).start("run", run_id, {"runId": run_id})
        stub.assert_no_pending_responses()
    assert arn.endswith(":" + name)


def test_a_throttled_start_is_an_error_the_machines_retry() -> None:
    import boto3
    import pytest

    from shared.ports.orchestration import ExecutionStartThrottledError

    # Given the Step Functions client, stubbed at the wire, throttling a start past botocore's retries
    client = boto3.client("stepfunctions", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:run"
    with Stubber(client) as stub:
        stub.add_client_error("start_execution", service_error_code="ThrottlingException", http_status_code=400)
        # When a run task starts its run's next execution, then it fails with the error name its machine retries
        with pytest.raises(ExecutionStartThrottledError):
            StepFunctionsOrchestrator(client, {"run": machine}).start(
                "run", "tenant-a/01J", {"runId": "x"}, generation=1
            )
        # and any other refusal stays the client's error
        stub.add_client_error("start_execution", service_error_code="StateMachineDoesNotExist", http_status_code=400)
        with pytest.raises(Exception) as refused:
            StepFunctionsOrchestrator(client, {"run": machine}).start("run", "tenant-a/01J", {"runId": "x"})
        assert not isinstance(refused.value, ExecutionStartThrottledError)
