"""An Advance task's read of its run (decision 0173), on moto: each task's last write names it on the run item
(``TASK_STAMP``); the next task of the same execution reads the run eventually consistently and keeps that read only
when it carries its predecessor's stamp with the tail closed, else reads again consistently; a halt is never decided
on an eventually consistent read."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from shared.engine import kernel
from shared.engine.kernel import advance
from shared.engine.runkinds import RUN_KINDS
from shared.engine.stamps import task_stamp
from shared.engine.version import APPENDS
from shared.ports import TASK_STAMP, RunRecord
from shared.storage import schema
from tests.helpers import hooked, stored_run
from tests.workflows import register_noop_loop

EXECUTION = "tenant-c--r-task-reads-run"


@pytest.fixture()
def ports(local_aws):
    from shared.wiring import get_ports

    return get_ports()


def _loop_run(ports: Any, iterations: int = 150) -> RunRecord:
    wid = register_noop_loop("tenant-c", "wf-task-reads", iterations)
    data = {"workflowId": wid, "build": {"buildId": "now", "appends": APPENDS}}
    return stored_run(ports, "r-task-reads", "pending", data=data)


def test_the_first_task_keeps_an_eventually_consistent_read_of_the_run_its_create_named(ports):
    # Given a run created as a create names it: the task before its first execution's first
    wid = register_noop_loop("tenant-c", "wf-task-reads", 150)
    data = {"workflowId": wid, "build": {"buildId": "now", "appends": APPENDS}}
    rec = stored_run(ports, "r-task-reads", "pending", data=data, task_stamp=task_stamp(EXECUTION, -1))
    # When that execution's first task runs
    with run_reads(ports, rec.run_id) as seen:
        out = _task(ports, rec.run_id, 0)
    # Then it kept its one eventually consistent read, and ran the run from its start
    assert seen[:1] == [False] and True not in seen and out["next"] == "continue"
    assert _went_on(ports, rec.run_id, -1)
    # And a continued execution's first task (no write names its predecessor) reads consistently at once
    with run_reads(ports, rec.run_id) as seen:
        _task(ports, rec.run_id, 0, f"{EXECUTION}-g1")
    assert seen[:1] == [True]


def _run_item(ports: Any, run_id: str) -> dict[str, Any]:
    return ports.runs._c.get_item(
        TableName=ports.settings.runs_table, Key={"pk": {"S": run_id}, "sk": {"S": schema.RUN_SK}}, ConsistentRead=True
    )["Item"]


@contextmanager
def run_reads(ports: Any, run_id: str, replica: list[dict[str, Any]] | None = None) -> Iterator[list[bool]]:
    """Whether each Query of ``run_id``'s run items on this thread was consistent; with ``replica``, an eventually
    consistent one answers those items (a replica behind the writes since they were read)."""
    client, me, seen = ports.runs._c, threading.get_ident(), []
    asked: dict[str, bool] = {}

    def mark(params: Any = None, **_: Any) -> None:
        values = params.get("ExpressionAttributeValues") or {}
        if threading.get_ident() == me and values.get(":p") == {"S": run_id} and ":a" in values:
            asked["consistent"] = bool(params.get("ConsistentRead"))
            seen.append(asked["consistent"])

    def lag(parsed: Any = None, **_: Any) -> None:
        if threading.get_ident() != me or replica is None or asked.pop("consistent", True):
            return
        parsed["Items"], parsed["Count"] = [dict(i) for i in replica], len(replica)

    with hooked(client, {"before-parameter-build.dynamodb.Query": mark, "after-call.dynamodb.Query": lag}):
        yield seen


def _task(
    ports: Any, run_id: str, hops: int, execution: str = EXECUTION, max_events: int = 99, *, warm: bool = False
) -> dict[str, Any]:
    """The Advance task at ``hops`` of ``execution`` (of at most about ``max_events`` events), on another container
    than the task before it (nothing handed on: it reads the run), or ``warm``, on the same one (decision 0177)."""
    if not warm:
        kernel._left.clear()
    return advance(ports, run_id, RUN_KINDS, max_events=max_events, hops=hops, execution=execution)


def _first_task_ran(ports: Any) -> tuple[RunRecord, int]:
    """A loop run whose first task of EXECUTION ran and went on: the run and its last sequence after it."""
    rec = _loop_run(ports)
    assert _task(ports, rec.run_id, 0)["next"] == "continue"
    return rec, ports.runs.get_run(rec.run_id).last_seq


def _items(ports: Any, run_id: str) -> list[dict[str, Any]]:
    """The run's items as stored (what a replica at this moment would answer)."""
    return ports.runs._run_items(run_id)


def _went_on(ports: Any, run_id: str, after: int) -> bool:
    """The run's log is whole and goes on past ``after`` (its last sequence before the task)."""
    events = ports.events.read_events(run_id)
    return [e["sequence"] for e in events] == list(range(len(events))) and len(events) - 1 > after


def test_each_task_names_itself_and_the_next_reads_its_run_eventually_consistently(ports):
    # Given a run whose first Advance task of an execution ran 99 events and went on
    rec = _loop_run(ports)
    with run_reads(ports, rec.run_id) as first:
        out = _task(ports, rec.run_id, 0)
    # (stored without a create's stamp: its eventually consistent read was not kept)
    assert out["next"] == "continue" and first[:2] == [False, True]
    after = ports.runs.get_run(rec.run_id).last_seq
    # Then its last write named it on the run item, with the tail closed
    item = _run_item(ports, rec.run_id)
    assert item[TASK_STAMP] == {"S": task_stamp(EXECUTION, 0)} and schema.OPEN_TAIL not in item
    # When the next task of the execution runs
    with run_reads(ports, rec.run_id) as second:
        out = _task(ports, rec.run_id, 1)
    # Then its read of the run was one eventually consistent Query, and it went on from where the first stopped
    assert out["next"] == "continue" and second[:1] == [False] and True not in second
    assert _went_on(ports, rec.run_id, after)
    assert _run_item(ports, rec.run_id)[TASK_STAMP] == {"S": task_stamp(EXECUTION, 1)}


@pytest.mark.parametrize(
    ("hops", "execution"),
    [(1, "another-execution"), (0 + 2, EXECUTION)],
    ids=["another execution's task", "a task whose predecessor is not the last writer"],
)
def test_a_read_not_stamped_by_the_task_before_is_read_again_consistently(ports, hops, execution):
    # Given a run whose last write was the first task of EXECUTION's
    rec, after = _first_task_ran(ports)
    # When a task whose predecessor did not write it last reads it
    with run_reads(ports, rec.run_id) as seen:
        out = _task(ports, rec.run_id, hops, execution)
    # Then it read the run again consistently, and went on from the stored sequence
    assert seen[:2] == [False, True] and out["next"] == "continue" and _went_on(ports, rec.run_id, after)


def test_a_retried_task_does_not_keep_an_eventually_consistent_read_of_its_own_write(ports):
    # Given an execution's second task that wrote its events, and is delivered again (its first delivery's answer
    # was lost)
    rec = _loop_run(ports)
    _task(ports, rec.run_id, 0)
    _task(ports, rec.run_id, 1)
    after = ports.runs.get_run(rec.run_id).last_seq
    # When it runs again with the same place in the execution
    with run_reads(ports, rec.run_id) as seen:
        out = _task(ports, rec.run_id, 1)
    # Then its run item names itself, not the task before: the read is made again consistently, and the retry goes on
    # after its first delivery's events (no event appended twice)
    assert seen[:2] == [False, True] and out["next"] == "continue" and _went_on(ports, rec.run_id, after)


def test_a_stale_paused_read_never_parks_a_run_its_resume_let_go(ports):
    # Given a run whose first task ran and went on, then was paused and resumed, and a replica still showing it paused
    # with the first task's stamp (behind the resume's write)
    rec, after = _first_task_ran(ports)
    assert ports.runs.update_status(rec.run_id, "paused", allowed_from=("running",))
    stale = _items(ports, rec.run_id)
    assert ports.runs.update_status(rec.run_id, "running", allowed_from=("paused",))
    # When the execution's next task reads the run from that replica
    with run_reads(ports, rec.run_id, replica=stale) as seen:
        out = _task(ports, rec.run_id, 1)
    # Then the paused read was not kept: it read the run again consistently and advanced it, parking nothing
    assert seen[:2] == [False, True] and out["next"] == "continue" and _went_on(ports, rec.run_id, after)


def test_a_stale_read_missing_a_cancel_writes_nothing_after_it(ports):
    # Given a run whose first task ran and went on, then a cancel request (``cancelling``), and a replica still showing
    # the first task's write (running, its stamp)
    rec, after = _first_task_ran(ports)
    stale = _items(ports, rec.run_id)
    assert ports.runs.update_status(rec.run_id, "cancelling", allowed_from=("running",))
    # When the execution's next task reads the run from that replica
    with run_reads(ports, rec.run_id, replica=stale) as seen:
        out = _task(ports, rec.run_id, 1)
    # Then it kept that read, but its first append's condition (the status) refused its events: it stopped, and the
    # log holds the first task's events only
    assert seen[:1] == [False] and out["next"] == "done"
    assert len(ports.events.read_events(rec.run_id)) == after + 1
    assert ports.runs.get_run(rec.run_id).status == "cancelling"


def _replay_of_a_completed_run(ports: Any) -> tuple[str, str]:
    """A completed source run (a short loop run to its end by its tasks) and a replay fork of it stored as its
    create stores it (named for EXECUTION's first task): (source, fork)."""
    wid = register_noop_loop("tenant-c", "wf-task-reads-src", 10)
    data = {"workflowId": wid, "build": {"buildId": "now", "appends": APPENDS}}
    src = stored_run(ports, "r-task-reads-src", "pending", data=data)
    assert advance(ports, src.run_id, RUN_KINDS)["next"] == "done"
    assert ports.runs.get_run(src.run_id).status == "completed"
    fork = {"sourceRunId": src.run_id, "fromSeq": 0, "mode": "replay"}
    rec = stored_run(
        ports, "r-task-reads-fork", "pending", data={**data, "fork": fork}, task_stamp=task_stamp(EXECUTION, -1)
    )
    return src.run_id, rec.run_id


def test_a_replay_s_index_task_reads_its_run_as_its_create_left_it_and_looks_for_no_index_first(ports):
    # Given a replay fork of a completed run, as its create stored it
    from shared.engine.forkindex import index_fork
    from shared.keys import FORK_SOURCE_SK
    from tests.helpers import naming, requests_sent

    _, fork = _replay_of_a_completed_run(ports)
    # When its first execution's Index task runs
    with run_reads(ports, fork) as seen, requests_sent(ports.runs._c, "GetItem") as gets:
        out = index_fork(ports, fork, EXECUTION)
    # Then it read its run once, eventually consistently, read no index before building one, and stored it
    assert out["next"] == "continue" and seen == [False]
    assert [g for g in naming(gets, fork) if g["Key"]["sk"] == {"S": FORK_SOURCE_SK}] == []
    first = ports.runs.get_aux(fork, FORK_SOURCE_SK)
    assert first is not None and first.get("calls") is not None
    # And a retried delivery of it (its first answer lost) builds and stores the same index again
    assert index_fork(ports, fork, EXECUTION)["next"] == "continue"
    assert ports.runs.get_aux(fork, FORK_SOURCE_SK) == first


def test_a_fork_s_index_is_of_its_source_as_its_request_read_it_and_reads_no_item_of_its_run(ports):
    # Given a replay fork of a completed run whose request read the source's log as ending 5 events sooner (a source
    # still running when asked), as a request stores it (decision 0180)
    from shared.engine.forkindex import index_fork, load
    from tests.helpers import naming, requests_sent

    src, _ = _replay_of_a_completed_run(ports)
    end = ports.runs.get_run(src).last_seq - 5
    wid = ports.runs.get_run(src).data["workflowId"]
    fork = {"sourceRunId": src, "fromSeq": 0, "mode": "replay", "sourceLastSeq": end}
    data = {"workflowId": wid, "build": {"buildId": "now", "appends": APPENDS}, "fork": fork}
    rec = stored_run(ports, "r-task-reads-asked", "pending", data=data, task_stamp=task_stamp(EXECUTION, -1))
    # When its Index task runs
    with requests_sent(ports.runs._c, "Query") as queries, requests_sent(ports.runs._c, "GetItem") as gets:
        out = index_fork(ports, rec.run_id, EXECUTION)
    # Then it indexed the source's log up to where its request read it, and read no item of the source's run
    assert out["next"] == "continue" and load(ports, rec.run_id)["digests"]["events"] == end + 1
    runs = ports.settings.runs_table
    assert [q for q in naming(queries + gets, src) if q["TableName"] == runs] == []
    assert [q for q in naming(queries, src) if q["TableName"] == ports.settings.events_table] != []
    # and its recorded calls eventually consistently (the log it read names none that did not show)
    calls = [q["ConsistentRead"] for q in naming(queries, src) if q["TableName"] == ports.settings.tool_calls_table]
    assert calls == [False]


def test_a_continued_execution_s_index_task_reads_nothing_of_the_source(ports):
    # Given a replay fork whose index was built and whose Advance tasks appended events
    from shared.engine.forkindex import index_fork
    from tests.helpers import naming, requests_sent

    src, fork = _replay_of_a_completed_run(ports)
    index_fork(ports, fork, EXECUTION)
    _task(ports, fork, 0, max_events=20)
    assert ports.runs.get_run(fork).last_seq >= 0
    # When a continued execution of it (continue-as-new) begins at its Index task
    with requests_sent(ports.events._c, "Query") as pages, run_reads(ports, fork) as seen:
        out = index_fork(ports, fork, f"{EXECUTION}-g1")
    # Then it read its run consistently (no write names its predecessor) and nothing of the source's log
    assert out["next"] == "continue" and seen == [True] and naming(pages, src) == []


# --------------------------------------------------------------------------- the run handed on (decision 0177)


def test_a_task_that_goes_on_hands_the_run_as_stored_and_the_next_reads_none_of_it(ports):
    # Given a run whose first task of EXECUTION ran 99 events and went on, in this container
    rec = _loop_run(ports)
    assert _task(ports, rec.run_id, 0)["next"] == "continue"
    # Then what it handed on is the run as stored: head, status, state, stamp and every other field
    handed = kernel._left.get(rec.run_id)
    assert handed is not None and handed == ports.runs.get_run(rec.run_id)
    assert handed.task_stamp == task_stamp(EXECUTION, 0) and handed.last_seq == 98
    # When the execution's next tasks run in the same container
    with run_reads(ports, rec.run_id) as seen:
        outs = [_task(ports, rec.run_id, hops, warm=True)["next"] for hops in (1, 2)]
    # Then neither read the run, each went on from where the one before stopped, and each handed the run as stored
    assert seen == [] and outs == ["continue", "continue"]
    assert _went_on(ports, rec.run_id, 2 * 99 - 1)
    assert kernel._left.get(rec.run_id) == ports.runs.get_run(rec.run_id)


def test_a_handed_run_is_taken_once_and_only_by_the_next_task(ports):
    # Given an execution's second task that ran in this container after its first, and is delivered again
    rec = _loop_run(ports)
    _task(ports, rec.run_id, 0)
    _task(ports, rec.run_id, 1, warm=True)
    after = ports.runs.get_run(rec.run_id).last_seq
    # When it runs again with the same place in the execution, in the same container
    with run_reads(ports, rec.run_id) as seen:
        out = _task(ports, rec.run_id, 1, warm=True)
    # Then it did not take what it handed itself (not its predecessor's): it read the run, and went on after its
    # first delivery's events
    assert seen[:1] == [False] and out["next"] == "continue" and _went_on(ports, rec.run_id, after)
    # And a task of another execution takes nothing handed either
    with run_reads(ports, rec.run_id) as seen:
        _task(ports, rec.run_id, 2, "another-execution", warm=True)
    assert seen != []


def test_a_handed_run_missing_a_cancel_writes_nothing_after_it(ports):
    # Given a run whose first task ran and went on in this container, then a cancel request (``cancelling``)
    rec, after = _first_task_ran(ports)
    assert ports.runs.update_status(rec.run_id, "cancelling", allowed_from=("running",))
    # When the execution's next task runs in the same container
    with run_reads(ports, rec.run_id) as seen:
        out = _task(ports, rec.run_id, 1, warm=True)
    # Then it took the run handed to it (running), but its first append's condition refused its events: it stopped
    # (its halt decided on a consistent read), and the log holds the first task's events only
    assert seen[:1] == [True] and out["next"] == "done"
    assert len(ports.events.read_events(rec.run_id)) == after + 1
    assert ports.runs.get_run(rec.run_id).status == "cancelling"


def test_only_a_task_that_goes_on_hands_the_run_on(ports):
    # Given the run as a task left it, in answers that wait (a Wait state: a signal may land meanwhile), park or end
    rec = _loop_run(ports)
    for nxt in ("wait", "park", "done"):
        out = {"runId": rec.run_id, "next": nxt, kernel.LEFT: rec}
        kernel.keep_left(rec.run_id, out)
        # Then nothing is handed on (the next task reads the run), and the answer carries no record
        assert kernel._left.get(rec.run_id) is None and kernel.LEFT not in out
    # And one that goes on hands it
    kernel.keep_left(rec.run_id, {"runId": rec.run_id, "next": "continue", kernel.LEFT: rec})
    assert kernel._left.get(rec.run_id) is rec


def test_a_replay_s_index_task_hands_its_run_to_its_first_advance(ports):
    from shared.engine.forkindex import index_fork

    # Given a replay fork of a completed run, as its create stored it
    _, fork = _replay_of_a_completed_run(ports)
    kernel._left.clear()
    # When its first execution's Index task and then its first Advance task run in one process
    gets: list[str] = []
    s3 = {"before-parameter-build.s3.GetObject": lambda params=None, **_: gets.append(str(params["Key"]))}
    with run_reads(ports, fork) as seen, hooked(ports.blobs._c, s3):
        indexed = index_fork(ports, fork, EXECUTION)
        advanced = advance(ports, fork, RUN_KINDS, hops=0, execution=EXECUTION)
    # Then only the Index task read the fork's run (once, eventually consistently): it wrote none of it and handed it
    # on; and the replay ran to its end, its log whole
    assert indexed["next"] == "continue" and seen == [False] and advanced["next"] == "done"
    assert ports.runs.get_run(fork).status == "completed" and _went_on(ports, fork, -1)
    # and the Advance task compared its events with the digests the Index task stored, with no read of them
    assert [k for k in gets if k.endswith("fork-digests.bin")] == []
