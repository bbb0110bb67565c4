"""Faults injected at the AWS SDK boundary: throttled writes, a task delivered twice, a task killed between two
transactions. After each: gap-free sequences, one terminal event, no duplicated event, no effect performed twice.
"""

from __future__ import annotations

import threading

from openwop_client.types import CreateRunRequest

from tests.faults import check_run, kill_after_write, throttle_writes
from tests.helpers import unique
from tests.wire import wait_terminal
from tests.workflows import register_noop_loop, register_scripted_agent


def _ports():
    from shared.wiring import get_ports

    return get_ports()


def _workflow() -> str:
    """An agent making two counter calls and an echo, then a side-effecting node: every kind of write."""
    return register_scripted_agent("tenant-a", "faults", then_effect=True)


def _start(client, wid: str, marker: str) -> str:
    script = {
        "calls": [
            {"tool": "conformance.eval:counter", "args": {"op": "inc", "key": marker}},
            {"tool": "conformance.eval:echo", "args": {"m": marker}},
            {"tool": "conformance.eval:counter", "args": {"op": "inc", "key": marker}},
        ],
        "answer": "done",
    }
    return client.runs_create(CreateRunRequest(workflowId=wid, inputs={"script": script})).runId


def _assert_exactly_once(run_id: str, marker: str) -> None:
    ports = _ports()
    events = ports.events.read_events(run_id)
    assert check_run(events) == []
    assert events[-1]["type"] == "run.completed"
    assert [e["type"] for e in events].count("agent.tool-called") == 3
    assert ports.host.counter_read("COUNTER#tenant-a", marker) == 2  # two increments, each once
    assert len(ports.host.query("LEDGER#tenant-a", run_id + "#")) == 1
    assert len(ports.tool_calls.list_calls(run_id)) == 3


def test_throttled_writes_are_absorbed_without_loss_or_duplication(host):
    # Given every other write of these runs answered ThrottlingException by "DynamoDB"
    client, wid = host.client(host.key_a), _workflow()
    markers = tuple(unique("thr") for _ in range(3))
    with throttle_writes(_ports().runs._c, markers) as got:
        runs = {m: _start(client, wid, m) for m in markers}
        for run_id in runs.values():
            wait_terminal(client, run_id)
    # Then faults were really injected (about half of each run's ~5 writes), and each run completed exactly once
    assert got.throttled >= 3 * 2
    for marker, run_id in runs.items():
        _assert_exactly_once(run_id, marker)


def test_a_task_killed_after_any_of_its_writes_is_retried_exactly_once(host):
    # Given four runs, each whose task dies right after its n-th transaction naming the run's marker (n = 1..4:
    # the first increment with its record, the echo's record, the second increment with its record, the append)
    client, wid = host.client(host.key_a), _workflow()
    plan = {unique(f"kill{n}"): n for n in range(1, 5)}
    with kill_after_write(_ports().runs._c, plan) as got:
        runs = {m: _start(client, wid, m) for m in plan}
        snaps = {m: wait_terminal(client, r, timeout=60) for m, r in runs.items()}
    # Then every task died once, Step Functions retried it, and nothing was lost, duplicated or re-fired
    assert got.crashed == 4
    for marker, run_id in runs.items():
        assert snaps[marker].status == "completed"
        _assert_exactly_once(run_id, marker)


def test_a_task_delivered_twice_at_once_appends_and_fires_once(host):
    # Given runs whose advance task is also delivered a second and third time, concurrently with the first
    from functions.tasks.advance_run.handler import lambda_handler

    client, wid = host.client(host.key_a), _workflow()
    markers = [unique("dup") for _ in range(3)]
    runs = {m: _start(client, wid, m) for m in markers}
    errors: list[BaseException] = []

    def deliver(run_id: str) -> None:
        try:
            for _ in range(20):
                out = lambda_handler({"runId": run_id}, None)
                if out["next"] == "done":
                    return
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=deliver, args=(r,)) for r in runs.values() for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for run_id in runs.values():
        wait_terminal(client, run_id)
    # Then every run completed once: no duplicated event and no effect fired twice
    assert errors == []
    for marker, run_id in runs.items():
        _assert_exactly_once(run_id, marker)


def _assert_whole_log(run_id: str) -> None:
    """Gap-free and once: every sequence, each event id once, one terminal event last; the head at the end and the
    tail closed."""
    from shared.storage import schema

    ports = _ports()
    events = ports.events.read_events(run_id)
    assert [e["sequence"] for e in events] == list(range(len(events)))
    assert len({e["eventId"] for e in events}) == len(events)
    assert [e["type"] for e in events].count("run.completed") == 1 and events[-1]["type"] == "run.completed"
    head = ports.runs._c.get_item(
        TableName=ports.settings.runs_table, Key={"pk": {"S": run_id}, "sk": {"S": schema.RUN_SK}}
    )["Item"]
    assert int(head["lastSeq"]["N"]) == len(events) - 1 and schema.OPEN_TAIL not in head


def test_a_task_killed_after_any_of_its_plain_pages_is_retried_into_a_whole_log(host):
    # Given runs whose first task dies right after its n-th plain page put (n = 1..3), one run at a time
    from tests.faults import kill_after_plain_page

    client, wid = host.client(host.key_a), register_noop_loop("tenant-a", "wf-loop-faults", 100)
    ports = _ports()
    for n in (1, 2, 3):
        with kill_after_plain_page(ports.events._c, ports.settings.events_table, n) as got:
            run_id = client.runs_create(CreateRunRequest(workflowId=wid)).runId
            snap = wait_terminal(client, run_id, timeout=60)
        # Then the task died once with its tail open, was retried from the log's tail, and the log is whole
        assert got.crashed == 1 and snap.status == "completed"
        _assert_whole_log(run_id)


def test_a_run_whose_first_task_dies_mid_way_goes_on_from_its_log_not_from_its_start(host):
    # Given a run whose first task dies after its 2nd plain page, before any append stored its state (the stored
    # state is still the one its create wrote), and a run of the same workflow left alone
    from tests.faults import kill_after_plain_page

    client, wid = host.client(host.key_a), register_noop_loop("tenant-a", "wf-loop-first-task", 100)
    ports = _ports()
    with kill_after_plain_page(ports.events._c, ports.settings.events_table, 2) as got:
        cut = client.runs_create(CreateRunRequest(workflowId=wid)).runId
        assert wait_terminal(client, cut, timeout=60).status == "completed"
    whole = client.runs_create(CreateRunRequest(workflowId=wid)).runId
    assert wait_terminal(client, whole, timeout=60).status == "completed"
    # Then its retried task folded the events the dead one appended and went on after them: it started once, and its
    # log is the one the run left alone wrote, event type for event type
    assert got.crashed == 1
    cut_types = [(e["type"], e.get("nodeId")) for e in ports.events.read_events(cut)]
    assert cut_types.count(("run.started", None)) == 1
    assert cut_types == [(e["type"], e.get("nodeId")) for e in ports.events.read_events(whole)]


def test_a_task_with_plain_pages_delivered_twice_at_once_appends_each_event_once(host):
    # Given runs of several pages a task whose advance task is also delivered twice more, concurrently
    from functions.tasks.advance_run.handler import lambda_handler

    client, wid = host.client(host.key_a), register_noop_loop("tenant-a", "wf-loop-faults", 100)
    runs = [client.runs_create(CreateRunRequest(workflowId=wid)).runId for _ in range(2)]
    errors: list[BaseException] = []

    def deliver(run_id: str) -> None:
        try:
            for _ in range(20):
                if lambda_handler({"runId": run_id}, None)["next"] == "done":
                    return
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=deliver, args=(r,)) for r in runs for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for run_id in runs:
        assert wait_terminal(client, run_id).status == "completed"
    # Then each log is whole: the racing tasks' pages collided instead of overlapping
    assert errors == []
    for run_id in runs:
        _assert_whole_log(run_id)
