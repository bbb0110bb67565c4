"""Canary tests for shared.local: the moto 5.2.5 patches and the manifest bootstrap.

Each canary fails if its patch is removed. When an upstream fix lands (moto #10101
startExecution casing), bump the moto pin, delete that ``patch_*`` (shared/local/sfn_patches.py) and its call in
shared/local/patches.py, and keep the canary: it must still pass on the fixed, unpatched moto.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError

from shared import manifest
from shared.local import ddb_streams, lambda_registry, sfn_patches
from shared.local.environment import state_machine_arn
from shared.local.stack import LocalAws
from shared.local.ttl import ttl_sweep
from tests.helpers import eventually, unique, wait_for_execution

ZIP = b"PK\x05\x06" + b"\x00" * 18  # an empty zip archive


@pytest.fixture(scope="module")
def role_arn(local_aws: LocalAws) -> str:
    arn: str = local_aws.client("iam").get_role(RoleName="openwop-local-role")["Role"]["Arn"]
    return arn


@pytest.fixture
def make_function(local_aws: LocalAws, role_arn: str) -> Iterator[Callable[..., str]]:
    """Create a moto Lambda function with a fresh name; register ``handler`` for it if given. Returns its ARN."""
    names: list[str] = []

    def make(handler: Callable[[Any, Any], Any] | None = None, name: str | None = None) -> str:
        name = name or unique("canary-fn")
        arn: str = local_aws.client("lambda").create_function(
            FunctionName=name, Runtime="python3.13", Role=role_arn, Handler="x.lambda_handler", Code={"ZipFile": ZIP}
        )["FunctionArn"]
        if handler is not None:
            lambda_registry.register_handler(name, handler)
        names.append(name)
        return arn

    yield make
    for name in names:
        lambda_registry.unregister_handler(name)


def run_machine(local_aws: LocalAws, role_arn: str, definition: dict[str, Any], payload: Any = None) -> dict[str, Any]:
    sfn = local_aws.client("stepfunctions")
    arn = sfn.create_state_machine(name=unique("canary-sm"), definition=json.dumps(definition), roleArn=role_arn)[
        "stateMachineArn"
    ]
    execution = sfn.start_execution(stateMachineArn=arn, name=unique("ex"), input=json.dumps(payload or {}))
    return wait_for_execution(sfn, execution["executionArn"])


# -- a. Lambda registry --------------------------------------------------------------------------------------------


def test_lambda_registry_runs_manifest_handler_module_in_process(
    local_aws: LocalAws, make_function: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a manifest function whose module is tests.helpers (imported lazily by the patch)
    fn = manifest.Function("canary_module", "tests.helpers", "task", memory_mb=256)
    monkeypatch.setattr(manifest, "FUNCTIONS", (*manifest.FUNCTIONS, fn))
    make_function(name=fn.local_name)
    lam = local_aws.client("lambda")

    # When it is invoked twice through the Lambda API
    answers = [
        json.loads(lam.invoke(FunctionName=fn.local_name, Payload=json.dumps({"n": n}))["Payload"].read())
        for n in (1, 2)
    ]

    # Then the real handler ran with a Lambda-like context (moto alone would echo the payload)
    assert [a["echo"] for a in answers] == [{"n": 1}, {"n": 2}]
    assert {a["functionName"] for a in answers} == {"openwop-canary-module"}
    assert answers[0]["memory"] == 256
    assert 0 < answers[0]["remainingMs"] <= 30_000
    assert answers[0]["requestId"] != answers[1]["requestId"]


def test_lambda_registry_exception_is_an_unhandled_function_error(
    local_aws: LocalAws, make_function: Callable[..., str]
) -> None:
    class CanaryError(Exception):
        pass

    def explode(event: Any, context: Any) -> Any:
        raise CanaryError("trial exploded")

    # Given a function whose handler raises
    arn = make_function(explode)

    # When it is invoked
    response = local_aws.client("lambda").invoke(FunctionName=arn, Payload=b"{}")

    # Then the answer has the AWS Python runtime's error shape
    body = json.loads(response["Payload"].read())
    assert response["FunctionError"] == "Unhandled"
    assert body["errorType"] == "CanaryError"
    assert body["errorMessage"] == "trial exploded"
    assert any("explode" in frame for frame in body["stackTrace"])


def test_lambda_registry_unserializable_result_is_a_marshal_error(
    local_aws: LocalAws, make_function: Callable[..., str]
) -> None:
    arn = make_function(lambda event, context: {"when": object()})

    response = local_aws.client("lambda").invoke(FunctionName=arn, Payload=b"{}")

    assert response["FunctionError"] == "Unhandled"
    assert json.loads(response["Payload"].read())["errorType"] == "Runtime.MarshalError"


def test_lambda_registry_unregistered_function_raises(local_aws: LocalAws, make_function: Callable[..., str]) -> None:
    # Given a function that exists in moto but has no handler anywhere
    arn = make_function()

    # When it is invoked, then the call fails instead of echoing the payload
    with pytest.raises(ClientError) as caught:
        local_aws.client("lambda").invoke(FunctionName=arn, Payload=b'{"echo": true}')
    assert caught.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert "no handler" in caught.value.response["Error"]["Message"]


def test_step_functions_retry_and_catch_see_the_exception_class(
    local_aws: LocalAws, role_arn: str, make_function: Callable[..., str]
) -> None:
    calls: list[Any] = []

    class TrialFailedError(Exception):
        pass

    def always_fails(event: Any, context: Any) -> Any:
        calls.append(event)
        raise TrialFailedError(f"attempt {len(calls)}")

    arn = make_function(always_fails)
    definition = {
        "StartAt": "Task",
        "States": {
            "Task": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": arn, "Payload": {"runId.$": "$.runId"}},
                "Retry": [{"ErrorEquals": ["States.TaskFailed"], "IntervalSeconds": 5, "MaxAttempts": 2}],
                "Catch": [{"ErrorEquals": ["TrialFailedError"], "ResultPath": "$.error", "Next": "Caught"}],
                "End": True,
            },
            "Caught": {"Type": "Pass", "End": True},
        },
    }

    # When a state machine runs the failing task (Retry intervals made instant)
    with sfn_patches.fast_waits():
        result = run_machine(local_aws, role_arn, definition, {"runId": "r-1"})

    # Then States.TaskFailed retried it twice and the Catch matched the exception class name
    assert result["status"] == "SUCCEEDED"
    assert calls == [{"runId": "r-1"}] * 3
    error = json.loads(result["output"])["error"]
    assert error["Error"] == "TrialFailedError"
    assert json.loads(error["Cause"])["errorMessage"] == "attempt 3"


def test_step_functions_lambda_task_returns_the_handler_result(
    local_aws: LocalAws, role_arn: str, make_function: Callable[..., str]
) -> None:
    arn = make_function(lambda event, context: {"score": event["trial"] * 10})
    definition = {
        "StartAt": "Task",
        "States": {
            "Task": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": arn, "Payload": {"trial.$": "$.trial"}},
                "ResultSelector": {"score.$": "$.Payload.score"},
                "End": True,
            }
        },
    }

    result = run_machine(local_aws, role_arn, definition, {"trial": 4})

    assert result["status"] == "SUCCEEDED"
    assert json.loads(result["output"]) == {"score": 40}


# -- b. DynamoDB Streams → Lambda, and TTL --------------------------------------------------------------------------


@pytest.fixture
def streamed_table(
    local_aws: LocalAws, make_function: Callable[..., str]
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A table with TTL and a NEW_AND_OLD_IMAGES stream mapped to a recording handler."""
    records: list[dict[str, Any]] = []
    arn = make_function(lambda event, context: records.extend(event["Records"]))
    ddb = local_aws.client("dynamodb")
    name = unique("canary-table")
    stream_arn = ddb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]["LatestStreamArn"]
    ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiresAt"})
    local_aws.client("lambda").create_event_source_mapping(
        EventSourceArn=stream_arn, FunctionName=arn, StartingPosition="LATEST"
    )
    yield name, records
    ddb.delete_table(TableName=name)


def test_stream_records_reach_the_handler_as_a_dynamodb_stream_event(
    local_aws: LocalAws, streamed_table: tuple[str, list[dict[str, Any]]]
) -> None:
    name, records = streamed_table
    ddb = local_aws.client("dynamodb")

    # When an item is written, changed and deleted by a user
    ddb.put_item(TableName=name, Item={"pk": {"S": "run-7"}, "v": {"N": "1"}, "b": {"B": b"\x00\x9c\xff"}})
    ddb.put_item(TableName=name, Item={"pk": {"S": "run-7"}, "v": {"N": "2"}})
    ddb.delete_item(TableName=name, Key={"pk": {"S": "run-7"}})
    assert ddb_streams.wait_for_stream_idle(10)

    # Then the handler saw three records in order, shaped like AWS's
    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY", "REMOVE"]
    assert {r["eventSource"] for r in records} == {"aws:dynamodb"}
    assert all(
        r["eventSourceARN"].startswith(f"arn:aws:dynamodb:us-east-1:123456789012:table/{name}/stream/") for r in records
    )
    assert records[0]["dynamodb"]["NewImage"] == {"pk": {"S": "run-7"}, "v": {"N": "1"}, "b": {"B": "AJz/"}}
    assert records[1]["dynamodb"]["OldImage"]["v"] == {"N": "1"}
    assert records[2]["dynamodb"]["Keys"] == {"pk": {"S": "run-7"}}
    assert records[2]["dynamodb"]["OldImage"]["v"] == {"N": "2"}
    assert abs(records[0]["dynamodb"]["ApproximateCreationDateTime"] - time.time()) < 60  # epoch seconds, UTC
    assert "userIdentity" not in records[2]


def test_ttl_sweep_deletes_expired_items_with_the_ttl_identity(
    local_aws: LocalAws, streamed_table: tuple[str, list[dict[str, Any]]]
) -> None:
    name, records = streamed_table
    ddb = local_aws.client("dynamodb")
    # Given one expired item, one fresh one and one whose TTL attribute is not a number
    ddb.put_item(TableName=name, Item={"pk": {"S": "old"}, "expiresAt": {"N": "1000"}})
    ddb.put_item(TableName=name, Item={"pk": {"S": "fresh"}, "expiresAt": {"N": "2000"}})
    ddb.put_item(TableName=name, Item={"pk": {"S": "text"}, "expiresAt": {"S": "1000"}})

    # When the TTL service sweeps at t=1500 (only this table: the stack is shared by the session)
    swept = ttl_sweep(1500, tables=[name])
    assert ddb_streams.wait_for_stream_idle(10)

    # Then only the expired item is gone, and its REMOVE record carries the TTL service identity
    assert swept == 1
    remaining = {i["pk"]["S"] for i in ddb.scan(TableName=name)["Items"]}
    assert remaining == {"fresh", "text"}
    removes = [r for r in records if r["eventName"] == "REMOVE"]
    assert [r["dynamodb"]["Keys"] for r in removes] == [{"pk": {"S": "old"}}]
    assert removes[0]["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def test_ttl_sweep_without_tables_finds_every_ttl_enabled_table(
    local_aws: LocalAws, streamed_table: tuple[str, list[dict[str, Any]]]
) -> None:
    name, _ = streamed_table
    ddb = local_aws.client("dynamodb")
    ddb.put_item(TableName=name, Item={"pk": {"S": "ancient"}, "expiresAt": {"N": "-1"}})

    # A sweep at t=-1 is global but touches nothing a real clock could have written
    assert ttl_sweep(-1) >= 1

    assert "Item" not in ddb.get_item(TableName=name, Key={"pk": {"S": "ancient"}})


# -- c. startExecution casing ---------------------------------------------------------------------------


def test_start_execution_sync2_runs_the_child_and_returns_its_output(local_aws: LocalAws, role_arn: str) -> None:
    sfn = local_aws.client("stepfunctions")
    child = sfn.create_state_machine(
        name=unique("canary-child"),
        definition=json.dumps(
            {"StartAt": "P", "States": {"P": {"Type": "Pass", "Result": {"child": "done"}, "End": True}}}
        ),
        roleArn=role_arn,
    )["stateMachineArn"]
    definition = {
        "StartAt": "Child",
        "States": {
            "Child": {
                "Type": "Task",
                "Resource": "arn:aws:states:::states:startExecution.sync:2",
                "Parameters": {"StateMachineArn": child, "Input": {"runId.$": "$.runId"}},
                "End": True,
            }
        },
    }

    result = run_machine(local_aws, role_arn, definition, {"runId": "r-2"})

    assert result["status"] == "SUCCEEDED", result
    output = json.loads(result["output"])
    assert output["Output"] == {"child": "done"}
    assert output["Input"] == {"runId": "r-2"}
    assert output["Status"] == "SUCCEEDED"
    assert isinstance(output["StartDate"], int)


# -- e. fast_waits ------------------------------------------------------------------------------------------------


def test_wait_states_really_wait_unless_fast_waits(local_aws: LocalAws, role_arn: str) -> None:
    sfn = local_aws.client("stepfunctions")
    definition = {"StartAt": "Hold", "States": {"Hold": {"Type": "Wait", "Seconds": 3600, "End": True}}}
    arn = sfn.create_state_machine(name=unique("canary-wait"), definition=json.dumps(definition), roleArn=role_arn)[
        "stateMachineArn"
    ]

    # Under fast_waits the Wait passes at once (timed: the window below is derived from it)
    with sfn_patches.fast_waits():
        started = time.monotonic()
        quick = sfn.start_execution(stateMachineArn=arn, name=unique("ex"), input="{}")["executionArn"]
        assert wait_for_execution(sfn, quick, timeout=30)["status"] == "SUCCEEDED"  # not the hour
        instant_s = time.monotonic() - started

    # By default a one-hour Wait holds: once the execution is in the Wait state, it is still there after a quiet
    # window of three times what a whole instant execution took above (an instant Wait would have left it by then)
    held = sfn.start_execution(stateMachineArn=arn, name=unique("ex"), input="{}")["executionArn"]
    eventually(lambda: _entered(sfn, held, "WaitStateEntered"), timeout=30)
    time.sleep(3 * instant_s)
    assert sfn.describe_execution(executionArn=held)["status"] == "RUNNING"
    assert not _entered(sfn, held, "WaitStateExited")
    sfn.stop_execution(executionArn=held)


def _entered(sfn: Any, execution_arn: str, event_type: str) -> bool:
    return any(e["type"] == event_type for e in sfn.get_execution_history(executionArn=execution_arn)["events"])


def test_stop_execution_aborts_an_execution_waiting_for_its_task_token(
    local_aws: LocalAws, role_arn: str, make_function: Callable[..., str]
) -> None:
    tokens: list[str] = []
    arn = make_function(lambda event, context: tokens.append(event["token"]))
    definition = {
        "StartAt": "Park",
        "States": {
            "Park": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                "Parameters": {"FunctionName": arn, "Payload": {"token.$": "$$.Task.Token"}},
                "Next": "After",
            },
            "After": {"Type": "Pass", "Result": "ran", "End": True},
        },
    }
    sfn = local_aws.client("stepfunctions")
    machine = sfn.create_state_machine(name=unique("canary-park"), definition=json.dumps(definition), roleArn=role_arn)[
        "stateMachineArn"
    ]
    started = time.monotonic()
    parked = sfn.start_execution(stateMachineArn=machine, name=unique("ex"), input="{}")["executionArn"]
    deadline = time.monotonic() + 60
    while not tokens:
        assert time.monotonic() < deadline, "the task never received its token"
        time.sleep(0.05)
    # A quiet window past the function's return: a Task that did not wait for its token would go on to After (one
    # Pass state, no I/O) as soon as the invoke returned. The window is as long again as reaching the token took
    # (an execution's start, a Task state's entry and an invoke), which on this stack outlasts a Pass step
    time.sleep(time.monotonic() - started)
    assert sfn.describe_execution(executionArn=parked)["status"] == "RUNNING"  # it waits for the token

    sfn.stop_execution(executionArn=parked)

    assert wait_for_execution(sfn, parked, timeout=30)["status"] == "ABORTED"  # as on AWS, not RUNNING forever
    history = sfn.get_execution_history(executionArn=parked)["events"]
    assert not [e for e in history if e.get("stateEnteredEventDetails", {}).get("name") == "After"]


# -- f. TransactWriteItems (shared.local.ddb_transactions) ---------------------------------------------------------


@pytest.fixture
def log_table(local_aws: LocalAws) -> Iterator[str]:
    ddb = local_aws.client("dynamodb")
    name = unique("canary-log")
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": "runId", "AttributeType": "S"},
            {"AttributeName": "seq", "AttributeType": "N"},
        ],
        KeySchema=[{"AttributeName": "runId", "KeyType": "HASH"}, {"AttributeName": "seq", "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
    )
    yield name
    ddb.delete_table(TableName=name)


def _append(table: str, run_id: str, seqs: range) -> list[dict[str, Any]]:
    return [
        {
            "Put": {
                "TableName": table,
                "Item": {"runId": {"S": run_id}, "seq": {"N": str(seq)}},
                "ConditionExpression": "attribute_not_exists(seq)",
            }
        }
        for seq in seqs
    ]


def test_transaction_with_a_failing_condition_writes_nothing(local_aws: LocalAws, log_table: str) -> None:
    ddb = local_aws.client("dynamodb")
    ddb.put_item(TableName=log_table, Item={"runId": {"S": "r"}, "seq": {"N": "1"}})

    # When one append of a transaction collides with an existing seq
    with pytest.raises(ClientError) as caught:
        ddb.transact_write_items(TransactItems=_append(log_table, "r", range(3)))

    # Then the whole transaction is cancelled with per-item reasons and nothing else was written
    assert caught.value.response["Error"]["Code"] == "TransactionCanceledException"
    reasons = [r["Code"] for r in caught.value.response["CancellationReasons"]]
    assert reasons == ["None", "ConditionalCheckFailed", "None"]
    assert [i["seq"]["N"] for i in ddb.scan(TableName=log_table)["Items"]] == ["1"]


def test_transaction_of_99_appends_copies_no_table(
    local_aws: LocalAws, log_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import copy

    from moto.dynamodb.models.table import Table

    ddb = local_aws.client("dynamodb")
    for start in range(0, 1000, 25):  # moto 5.2.5 alone deep-copies these 1,000 items once per transaction item
        puts = [
            {"PutRequest": {"Item": {"runId": {"S": "big"}, "seq": {"N": str(i)}}}} for i in range(start, start + 25)
        ]
        ddb.batch_write_item(RequestItems={log_table: puts})
    # (counted, not timed: what made it slow was a deep copy of the whole table per item of the transaction)
    tables_copied: list[str] = []
    deepcopy = copy.deepcopy

    def watched(value: Any, memo: Any = None) -> Any:
        if isinstance(value, Table):
            tables_copied.append(value.name)
        return deepcopy(value, memo)

    monkeypatch.setattr(copy, "deepcopy", watched)
    ddb.transact_write_items(TransactItems=_append(log_table, "new", range(99)))
    monkeypatch.setattr(copy, "deepcopy", deepcopy)

    assert (
        ddb.query(
            TableName=log_table,
            KeyConditionExpression="runId = :r",
            ExpressionAttributeValues={":r": {"S": "new"}},
            Select="COUNT",
        )["Count"]
        == 99
    )
    assert tables_copied == []  # unpatched: the table, once per item (99 copies of 1,000 items)


def test_transact_get_items_never_sees_half_of_a_transaction(local_aws: LocalAws, log_table: str) -> None:
    import threading

    ddb = local_aws.client("dynamodb")

    def pair(value: int) -> list[dict[str, Any]]:
        return [
            {
                "Put": {
                    "TableName": log_table,
                    "Item": {"runId": {"S": "pair"}, "seq": {"N": str(seq)}, "v": {"N": str(value)}},
                }
            }
            for seq in range(1, 26)
        ]

    ddb.transact_write_items(TransactItems=pair(0))
    keys = [
        {"Get": {"TableName": log_table, "Key": {"runId": {"S": "pair"}, "seq": {"N": str(seq)}}}}
        for seq in range(1, 26)
    ]
    done = threading.Event()

    seen: list[set[str]] = []

    def writer() -> None:
        # bounded; it writes on until the reader has read 20 times meanwhile, however the threads are scheduled
        for value in range(1, 2001):
            ddb.transact_write_items(TransactItems=pair(value))
            if len(seen) >= 20:
                break
        done.set()

    # When one thread rewrites 25 items together while another reads them together
    thread = threading.Thread(target=writer)
    thread.start()
    while not done.is_set() or not seen:
        seen.append({r["Item"]["v"]["N"] for r in ddb.transact_get_items(TransactItems=keys)["Responses"]})
    thread.join()
    # Then every read saw one transaction's values, never a mix of two
    assert [values for values in seen if len(values) != 1] == []
    assert len(seen) > 1


def test_a_read_that_sees_a_transactions_first_write_sees_its_last(
    local_aws: LocalAws, log_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from shared.local import ddb_transactions

    ddb = local_aws.client("dynamodb")
    head = {"runId": {"S": "head"}, "seq": {"N": "0"}}
    ddb.put_item(TableName=log_table, Item={**head, "lastSeq": {"N": "0"}})
    first_written, read_done = threading.Event(), threading.Event()
    write = ddb_transactions._write

    def paused(backend: Any, op_type: str, op: dict[str, Any], table_name: str, key: dict[str, Any]) -> None:
        write(backend, op_type, op, table_name, key)
        if op_type == "Update":  # the head moved; its page is not written yet
            first_written.set()
            # a quiet window: time for a read that is not held back to finish (a held one finishes after it)
            read_done.wait(1.0)

    monkeypatch.setattr(ddb_transactions, "_write", paused)
    # Given an append (the head's lastSeq, then the page of that event) paused between its two writes
    append = [
        {
            "Update": {
                "TableName": log_table,
                "Key": head,
                "UpdateExpression": "SET lastSeq = :n",
                "ExpressionAttributeValues": {":n": {"N": "1"}},
            }
        },
        {"Put": {"TableName": log_table, "Item": {"runId": {"S": "r"}, "seq": {"N": "1"}}}},
    ]
    writer = threading.Thread(target=ddb.transact_write_items, kwargs={"TransactItems": append})
    writer.start()
    assert first_written.wait(10)
    # When a reader reads the head, then the pages up to it (as a poll does)
    last = int(ddb.get_item(TableName=log_table, Key=head, ConsistentRead=True)["Item"]["lastSeq"]["N"])
    pages = ddb.query(
        TableName=log_table,
        KeyConditionExpression="runId = :r",
        ExpressionAttributeValues={":r": {"S": "r"}},
        ConsistentRead=True,
    )["Items"]
    read_done.set()
    writer.join(10)
    # Then the head it saw has its page: it read after the whole transaction, never between its writes
    assert last == 1
    assert [int(p["seq"]["N"]) for p in pages] == [1]


# -- bootstrap ----------------------------------------------------------------------------------------------------


def test_bootstrap_creates_the_manifest_stack_and_is_idempotent(local_aws: LocalAws) -> None:
    # When bootstrap runs again
    local_aws.bootstrap()

    ddb = local_aws.client("dynamodb")
    runs = ddb.describe_table(TableName="openwop-runs")["Table"]
    assert runs["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert runs["GlobalSecondaryIndexes"][0]["Projection"] == {"ProjectionType": "ALL"}
    ttl = ddb.describe_time_to_live(TableName="openwop-idempotency")["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expiration"}
    s3 = local_aws.client("s3")
    rules = s3.get_bucket_encryption(Bucket="openwop-fixtures")["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert all(s3.get_public_access_block(Bucket="openwop-fixtures")["PublicAccessBlockConfiguration"].values())

    sfn = local_aws.client("stepfunctions")
    run_sm = next(sm for sm in manifest.STATE_MACHINES if sm.key == "run")
    definition = sfn.describe_state_machine(stateMachineArn=state_machine_arn(run_sm))["definition"]
    assert "${" not in definition
    assert "arn:aws:lambda:us-east-1:123456789012:function:openwop-advance-run" in definition
    machines = [m["name"] for m in sfn.list_state_machines()["stateMachines"]]
    assert sorted(n for n in machines if not n.startswith("canary")) == [
        "openwop-eval",
        "openwop-fork",
        "openwop-fork_hold",
        "openwop-run",
        "openwop-run_hold",
        "openwop-timer",
    ]

    mappings = local_aws.client("lambda").list_event_source_mappings(FunctionName="openwop-erase-run")
    assert [m["EventSourceArn"] for m in mappings["EventSourceMappings"]] == [runs["LatestStreamArn"]]

    from shared.settings import get_settings

    assert get_settings().state_machine_arn("run") == state_machine_arn(run_sm)
    assert get_settings().runs_table == "openwop-runs"


def _distributed_map(step: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A state machine of one Distributed Map over ``$.items``, each child running ``step``."""
    processor = {
        "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
        "StartAt": "Step",
        "States": {"Step": step},
    }
    each = {"Type": "Map", "ItemsPath": "$.items", **fields, "ItemProcessor": processor, "End": True}
    return {"StartAt": "Each", "States": {"Each": each}}


def test_a_distributed_map_worker_runs_more_items_than_the_recursion_limit(local_aws: LocalAws, role_arn: str) -> None:
    import sys

    # Given a Distributed Map of one worker over more items than Python's default recursion limit
    assert sys.getrecursionlimit() <= 1000
    items = list(range(1_500))
    double = {"Type": "Pass", "Parameters": {"n.$": "States.MathAdd($, $)"}, "End": True}
    definition = _distributed_map(double, MaxConcurrency=1)
    # When it runs, then every item ran, in order
    done = run_machine(local_aws, role_arn, definition, {"items": items})
    assert done["status"] == "SUCCEEDED", done
    assert [o["n"] for o in json.loads(done["output"])] == [2 * i for i in items]


def test_an_item_batcher_hands_each_child_a_batch_of_items_as_aws_does(local_aws: LocalAws, role_arn: str) -> None:
    # Given a Distributed Map batching its items, the batch size a path of the state's input, a BatchInput, and a
    # byte limit that a long item meets first
    items = [{"i": i} for i in range(7)] + [{"i": 7, "pad": "x" * 120}, {"i": 8}]
    batcher = {"MaxItemsPerBatchPath": "$.size", "MaxInputBytesPerBatch": 160, "BatchInput": {"tag": "b"}}
    definition = _distributed_map({"Type": "Pass", "End": True}, ItemBatcher=batcher)
    # When it runs
    done = run_machine(local_aws, role_arn, definition, {"items": items, "size": 3})
    # Then each child got {"Items": [...], "BatchInput": ...}: three items at most, in order, and the long item
    # alone where it would pass the byte limit
    assert done["status"] == "SUCCEEDED", done
    got = json.loads(done["output"])
    assert [[x["i"] for x in b["Items"]] for b in got] == [[0, 1, 2], [3, 4, 5], [6], [7], [8]]
    assert {json.dumps(b["BatchInput"]) for b in got} == {'{"tag": "b"}'}
    # And a definition without ItemBatcher is untouched (each child one item), one with an unknown field refused
    del definition["States"]["Each"]["ItemBatcher"]
    plain = run_machine(local_aws, role_arn, definition, {"items": items[:2]})
    assert json.loads(plain["output"]) == items[:2]
    definition["States"]["Each"]["ItemBatcher"] = {"MaxItems": 2}
    with pytest.raises(Exception, match="ItemBatcher|Invalid"):
        run_machine(local_aws, role_arn, definition, {"items": items})


def test_a_query_of_one_partition_reads_only_that_partition(
    local_aws: LocalAws, log_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ddb = local_aws.client("dynamodb")
    for run in ("a", "b", "c"):
        for start in range(0, 50, 25):
            ddb.batch_write_item(
                RequestItems={
                    log_table: [
                        {"PutRequest": {"Item": {"runId": {"S": run}, "seq": {"N": str(i)}, "v": {"S": f"{run}{i}"}}}}
                        for i in range(start, start + 25)
                    ]
                }
            )

    def pages(**extra: Any) -> list[list[str]]:
        out, start = [], None
        for _ in range(20):
            kw = {"ExclusiveStartKey": start} if start else {}
            got = ddb.query(
                TableName=log_table,
                KeyConditionExpression="runId = :r AND seq >= :s",
                ExpressionAttributeValues={":r": {"S": "b"}, ":s": {"N": "5"}, ":x": {"S": "b7"}},
                FilterExpression="v <> :x",
                Limit=10,
                **extra,
                **kw,
            )
            out.append([i["v"]["S"] for i in got["Items"]])
            start = got.get("LastEvaluatedKey")
            if not start:
                return out
        raise AssertionError("the pages did not end")

    # Given the partition's pages forward and backward through the patched Query
    forward, backward = pages(), pages(ScanIndexForward=False)
    # Then they are DynamoDB's: partition b only, in seq order, the range condition, filter and Limit applied
    # (Limit counts the items read, so the first page holds 9)
    assert sum(forward, []) == [f"b{i}" for i in range(5, 50) if i != 7] and len(forward[0]) == 9  # Limit counts b7 too
    assert sum(backward, []) == [f"b{i}" for i in range(49, 4, -1) if i != 7]
    # and no Query of a partition lists the whole table (moto 5.2.5 sorts every item of it for each one)
    from shared.local import ddb_query
    from shared.local.moto_data import dynamodb_table

    def whole_table(self: Any) -> Any:
        raise AssertionError("a partition's Query listed the whole table")

    from moto.dynamodb.models.table import Table

    assert getattr(Table.query, "__wrapped__", None) is not None  # the patch is on (moto's own Query is wrapped)
    monkeypatch.setattr(ddb_query, "_moto_all_items", whole_table)
    assert pages() == forward
    empty = ddb.query(
        TableName=log_table, KeyConditionExpression="runId = :r", ExpressionAttributeValues={":r": {"S": "none"}}
    )
    assert empty["Items"] == [] and len(dynamodb_table(log_table).items) == 3  # an unknown partition is not made


class _Tripwire(list):  # type: ignore[type-arg]
    """A queue's messages that may be appended to but not walked."""

    def __iter__(self) -> Any:
        raise AssertionError("a send walked the queue's messages")


def test_a_send_to_a_deep_fifo_queue_walks_none_of_its_messages(local_aws: LocalAws) -> None:
    from shared.local.moto_data import queue_for

    sqs = local_aws.client("sqs")
    url = sqs.create_queue(QueueName=unique("canary-q") + ".fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]

    def send(first: int, count: int = 10, group: str = "g") -> list[str]:
        got = sqs.send_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": f"m{i}", "MessageBody": f"body-{i}", "MessageGroupId": group, "MessageDeduplicationId": f"d{i}"}
                for i in range(first, first + count)
            ],
        )
        assert not got.get("Failed"), got
        return [e["Id"] for e in got["Successful"]]

    # Given a FIFO queue holding 200 messages
    for first in range(0, 200, 10):
        send(first)
    queue = queue_for(url)
    held = list(queue._messages)
    # When ten more are sent while its messages cannot be walked, then all ten are taken without walking them
    queue._messages = _Tripwire(held)
    assert send(200) == [f"m{i}" for i in range(200, 210)]
    queue._messages = queue._messages[:]  # a plain list again (slicing does not walk through __iter__)
    # and the queue holds 210 in order; counts are still there for GetQueueAttributes (read outside a send)
    assert [m.body for m in queue._messages] == [f"body-{i}" for i in range(210)]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == "210" and attrs["FifoQueue"] == "true"
    # and a message whose deduplication id the queue holds is still dropped (moto's own walk decides it), beside a
    # new one taken
    send(205, 10)
    assert [m.body for m in queue._messages][205:] == [f"body-{i}" for i in range(205, 215)]
    assert len(queue._messages) == 215


def test_an_execution_is_never_seen_succeeded_without_its_output(local_aws: LocalAws) -> None:
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramEnded
    from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication

    # Given an execution whose program ended with an output, watched at the moment its status changes
    seen: list[tuple[str, Any]] = []

    class Watched:
        output: Any = None
        stop_date: Any = None
        exec_worker = SimpleNamespace(
            env=SimpleNamespace(program_state=ProgramEnded, states=SimpleNamespace(get_input=lambda: {"n": 2}))
        )

        @property
        def exec_status(self) -> Any:
            return seen[-1][0] if seen else None

        @exec_status.setter
        def exec_status(self, value: Any) -> None:
            seen.append((value.value, self.output))

    # When moto reflects the end (the step a DescribeExecution can race)
    BaseExecutionWorkerCommunication(Watched())._reflect_execution_status()  # type: ignore[arg-type]

    # Then the output was there before the status said SUCCEEDED
    assert seen == [("SUCCEEDED", {"n": 2})]


def test_the_server_dispatcher_reads_moto_s_module_list_without_the_filesystem(
    local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from moto import backends

    # Given the patched embedded AWS (the list read once at start)
    listed = list(backends.list_of_moto_modules())
    assert {"dynamodb", "stepfunctions", "s3", "sqs"} <= set(listed)

    # When the folder can no longer be listed, a request still finds its backend
    def no_listdir(path: str) -> list[str]:
        raise AssertionError(f"listed {path} during a request")

    monkeypatch.setattr(os, "listdir", no_listdir)
    tables = local_aws.client("dynamodb").list_tables()["TableNames"]

    # Then it was dispatched with the list as read at start, and no request listed the folder
    assert "openwop-runs" in tables
    assert list(backends.list_of_moto_modules()) == listed


def test_the_step_functions_interpreter_keeps_one_client_per_service(local_aws: LocalAws) -> None:
    from moto.stepfunctions.parser.asl.utils.boto_client import boto_client_for

    # Given the patched interpreter's client factory
    # When it is asked for a Lambda client twice (two tasks) and for an S3 client once
    first, second = boto_client_for("us-east-1", "lambda"), boto_client_for("us-east-1", "lambda")
    s3 = boto_client_for("us-east-1", "s3")

    # Then both tasks share one client (one connection pool), signed with the endpoint's credential
    assert first is second and s3 is not first
    assert first.meta.service_model.service_name == "lambda" and s3.meta.service_model.service_name == "s3"
    assert first._request_signer._credentials.access_key == local_aws.credential.access_key_id
    assert first.meta.config.max_pool_connections >= 10
    # and the kept client answers
    assert "Functions" in first.list_functions()


def test_region_lists_are_answered_once_per_process(local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3
    import botocore.session

    # Given the patched embedded AWS, which has asked for EC2's regions (moto's EC2 models, imported at start)
    known = boto3.Session().get_available_regions("ec2")
    assert "us-east-1" in known

    # When botocore could no longer answer, a new session asks again
    def unanswerable(*args: Any, **kwargs: Any) -> list[str]:
        raise AssertionError("botocore asked for a region list again")

    monkeypatch.setattr(botocore.session.Session, "get_available_regions", unanswerable)
    again = boto3.Session().get_available_regions("ec2")

    # Then the answer is the one read at start, as a list of its own
    assert again == known and again is not known
