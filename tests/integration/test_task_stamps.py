"""Task stamps through the stack (decision 0173): a create names its run's first task's predecessor by the name of
the execution it starts, and each task names itself by the name Step Functions gives its execution, so a run's
tasks read it eventually consistently."""

from __future__ import annotations

import json

from openwop_client.types import CreateRunRequest

from shared.engine.stamps import task_stamp
from shared.ports import TASK_STAMP
from shared.storage import schema
from tests.helpers import naming, requests_sent
from tests.wire import wait_terminal
from tests.workflows import register_noop_loop


def test_a_run_s_create_and_tasks_name_them_as_its_execution_is_named(host):
    # Given a workflow whose run takes two Advance tasks (about 5,200 events; a task appends at most 4,950)
    from shared.wiring import get_ports

    ports = get_ports()
    wid = register_noop_loop("tenant-a", "wf-task-stamps", 1300)
    client = host.client(host.key_a)
    # When a run of it is created and runs to its end
    with requests_sent(ports.runs._c, "TransactWriteItems") as sent:
        run_id = client.runs_create(CreateRunRequest(workflowId=wid)).runId
        assert wait_terminal(client, run_id, timeout=120).status == "completed"
    rec = ports.runs.get_run(run_id)
    # the ARN its create stored before the start (decision 0175) is the execution Step Functions ran for it, and
    # the create sent no write after the start
    described = ports.orchestrator._c.describe_execution(executionArn=str(rec.execution_arn))
    assert json.loads(described["input"])["runId"] == run_id and described["status"] == "SUCCEEDED"
    execution = described["name"]
    # Then its create named the task before that execution's first
    creates = [
        put["Put"]["Item"]
        for params in naming(sent, run_id)
        for put in params["TransactItems"]
        if "Put" in put and put["Put"]["Item"].get("sk") == {"S": schema.RUN_SK}
    ]
    assert [item[TASK_STAMP] for item in creates] == [{"S": task_stamp(execution, -1)}]
    # And its last task (the second of that execution) named itself by the same name
    item = ports.runs._c.get_item(
        TableName=ports.settings.runs_table, Key={"pk": {"S": run_id}, "sk": {"S": schema.RUN_SK}}
    )["Item"]
    assert item[TASK_STAMP] == {"S": task_stamp(execution, 1)} and rec.last_seq > 4950
