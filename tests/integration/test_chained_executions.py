"""Chained executions on the local stack (decision 0191): a run's execution is one task, which starts what the run does
next itself: its next execution, or a hold on the hold machine, whose ARN the run stores for a cancel to stop."""

from __future__ import annotations

import contextlib
from typing import Any

from openwop_client.types import CreateRunRequest, ForkRunRequest

from tests.helpers import eventually, unique
from tests.integration.test_engine import HOLD_THEN_EFFECT
from tests.wire import all_events, types_of, wait_terminal


def _ports() -> Any:
    from shared.wiring import get_ports

    return get_ports()


def execution_arn(machine: str, run_id: str, generation: int) -> str:
    from shared.local.environment import run_execution_arn

    return run_execution_arn(machine, run_id, generation)


def _machine_arn(machine: str, run_id: str) -> str:
    """The ARN of ``machine`` (a run's executions' machine, as ``execution_arn`` names them)."""
    return execution_arn(machine, run_id, 0).rsplit(":", 1)[0].replace(":execution:", ":stateMachine:")


def described(host: Any, arn: str) -> dict[str, Any] | None:
    """The execution ``arn`` as Step Functions describes it; None when it was never started."""
    try:
        return dict(host.aws.client("stepfunctions").describe_execution(executionArn=arn))
    except Exception:  # noqa: BLE001 - ExecutionDoesNotExist, as the client raises it
        return None


def executions_of(host: Any, run_id: str, kind: str = "run") -> dict[str, str]:
    """Every execution of ``run_id`` (``kind``: ``run`` or ``fork``), on its chained machine and its hold machine
    (decisions 0191, 0192), ARN -> status: generation by generation, until one is on neither."""
    from shared.local.environment import run_executions

    return {d["executionArn"]: d["status"] for d in run_executions(lambda arn: described(host, arn), kind, run_id)}


def all_ended(host: Any, run_id: str) -> bool:
    """Whether no execution of the run is running, and one was stopped (what a cancel of a held run leaves)."""
    statuses = eventually(lambda: (s := executions_of(host, run_id)) and "RUNNING" not in s.values() and s, timeout=60)
    return "ABORTED" in statuses.values()


def entered(host: Any, arn: str) -> list[str]:
    """The states an execution entered, in order, once it has ended (its history, through the local stack)."""
    eventually(lambda: (described(host, arn) or {}).get("status") not in (None, "RUNNING"), timeout=30)
    history = host.aws.client("stepfunctions").get_execution_history(executionArn=arn, maxResults=1000)["events"]
    return [e["stateEnteredEventDetails"]["name"] for e in history if e["type"].endswith("StateEntered")]


def test_a_run_of_three_tasks_is_three_executions_of_one_state_each(host):
    from shared.engine.stamps import task_stamp
    from shared.orchestration.step_functions import execution_name
    from shared.ports.runs import TASK_STAMP
    from shared.services.workflows import register_workflow
    from tests.workflows import noop_loop

    # Given a run of ~10,000 events (a task appends at most 4,950)
    wid = register_workflow(_ports(), "tenant-a", noop_loop(unique("chain"), 2_499))
    client = host.client(host.key_a)
    run_id = client.runs_create(CreateRunRequest(workflowId=wid)).runId
    # When it runs to its end
    assert wait_terminal(client, run_id, timeout=120).status == "completed"
    # Then each of its tasks was an execution of its own that entered only its Advance task, each started by the one
    # before it, generation after generation, and no fourth
    for generation in range(3):
        assert entered(host, execution_arn("run", run_id, generation)) == ["Advance"], generation
    assert described(host, execution_arn("run", run_id, 3)) is None
    assert described(host, execution_arn("run_hold", run_id, 1)) is None  # nothing held it
    # and the execution the run names is its first (a continuation stores nothing): a stop of it, as a cancel or an
    # erasure sends, changes nothing and raises nothing
    assert _ports().runs.get_run(run_id).execution_arn == execution_arn("run", run_id, 0)
    _ports().orchestrator.stop(execution_arn("run", run_id, 0))
    assert (described(host, execution_arn("run", run_id, 0)) or {}).get("status") == "SUCCEEDED"
    # and its log is whole and in order
    events = _ports().events.read_events(run_id)
    assert [e["sequence"] for e in events] == list(range(len(events))) and len(events) > 9_900
    assert [e["type"] for e in events].count("run.completed") == 1
    # and its last write is stamped as the third task of its first execution: its tasks expect their predecessors'
    # stamps across executions (decisions 0173, 0177)
    item = host.aws.client("dynamodb").get_item(
        TableName=_ports().settings.runs_table, Key={"pk": {"S": run_id}, "sk": {"S": "RUN"}}
    )["Item"]
    assert item[TASK_STAMP]["S"] == task_stamp(execution_name(run_id, "run"), 2)


def test_a_run_that_waits_is_held_by_the_hold_machine_for_one_task(host):
    # Given a run whose first node holds for 2 s (longer than a task sleeps: a Wait state)
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId="conformance-replay-side-effect", inputs={"delayMs": 2000}))
    # When it runs to its end
    assert wait_terminal(client, run.runId, timeout=60).status == "completed"
    # Then its first execution was its one task, which handed the hold to the hold machine: its Entry held at once,
    # then one task advanced the run to its end there (decision 0192: three states, no loop's Route or Done)
    assert entered(host, execution_arn("run", run.runId, 0)) == ["Advance"]
    held = execution_arn("run_hold", run.runId, 1)
    assert entered(host, held) == ["Entry", "HoldOnce", "AdvanceOnce"]
    assert described(host, execution_arn("run", run.runId, 2)) is None
    assert described(host, execution_arn("run_hold", run.runId, 2)) is None
    # and the run names the execution that held it (what a cancel stops)
    assert _ports().runs.get_run(run.runId).execution_arn == held
    assert types_of(all_events(client, run.runId)) == HOLD_THEN_EFFECT


def test_a_run_goes_on_after_its_hold_in_the_chained_machine_with_its_tasks_stamps(host):
    from shared.engine.stamps import task_stamp
    from shared.orchestration.step_functions import execution_name
    from shared.ports.runs import TASK_STAMP
    from shared.services.workflows import register_workflow
    from tests.workflows import definition, edge, node, static

    # Given a run that holds 2 s (a Wait state), then appends ~10,000 events (a task appends at most 4,950)
    loop = {"maxLoopbackIterations": 2_499}
    nodes = [node("w", "core.conformance.hold", inputs={"delayMs": static(2000)})]
    nodes += [node(n, "core.noop") for n in ("s", "a", "b")]
    edges = [edge("w", "s", eid="ws"), edge("s", "a", eid="sa"), edge("a", "b", eid="ab"), edge("b", "a", eid="ba")]
    wid = register_workflow(_ports(), "tenant-a", definition(unique("chain-hold"), nodes, edges, settings=loop))
    client = host.client(host.key_a)
    run_id = client.runs_create(CreateRunRequest(workflowId=wid)).runId
    # When it runs to its end
    assert wait_terminal(client, run_id, timeout=120).status == "completed"
    # Then its first task handed the hold over, the hold machine held and made one task, which went on in the chained
    # machine (its next generation), where the run went on and ended, an execution of one state a task
    assert entered(host, execution_arn("run", run_id, 0)) == ["Advance"]
    assert entered(host, execution_arn("run_hold", run_id, 1)) == ["Entry", "HoldOnce", "AdvanceOnce"]
    last = 2
    while described(host, execution_arn("run", run_id, last + 1)) is not None:
        last += 1
    assert last >= 3
    for generation in range(2, last + 1):
        assert entered(host, execution_arn("run", run_id, generation)) == ["Advance"], generation
        assert described(host, execution_arn("run_hold", run_id, generation)) is None
    # and every task, the hold's among them, was stamped in place as a task of its first execution: the last one's
    # stamp is the task ``last`` (the hops carried across the hold)
    item = host.aws.client("dynamodb").get_item(
        TableName=_ports().settings.runs_table, Key={"pk": {"S": run_id}, "sk": {"S": "RUN"}}
    )["Item"]
    assert item[TASK_STAMP]["S"] == task_stamp(execution_name(run_id, "run"), last)
    events = _ports().events.read_events(run_id)
    assert [e["sequence"] for e in events] == list(range(len(events))) and len(events) > 9_900


def test_a_fork_that_waits_is_held_by_its_hold_machine_for_one_task(host):
    # Given a completed run whose first node holds for 2 s
    client = host.client(host.key_a)
    src = client.runs_create(CreateRunRequest(workflowId="conformance-replay-side-effect", inputs={"delayMs": 2000}))
    assert wait_terminal(client, src.runId, timeout=60).status == "completed"
    # When it is branched from its start
    fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=0, mode="branch"))
    assert wait_terminal(client, fork.runId, timeout=60).status == "completed"
    # Then the fork's first task handed its hold to the fork's hold machine, which held and made one task
    assert entered(host, execution_arn("fork", fork.runId, 0)) == ["Advance"]
    held = execution_arn("fork_hold", fork.runId, 1)
    assert entered(host, held) == ["Entry", "HoldOnce", "AdvanceOnce"]
    assert _ports().runs.get_run(fork.runId).execution_arn == held


def test_a_cancel_stops_the_execution_that_holds_the_run(host):
    # Given a run holding for 60 s on the hold machine
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId="conformance-replay-side-effect", inputs={"delayMs": 60_000}))
    held = execution_arn("run_hold", run.runId, 1)
    eventually(lambda: (described(host, held) or {}).get("status") == "RUNNING", timeout=30)
    eventually(lambda: _ports().runs.get_run(run.runId).execution_arn == held, timeout=30)
    # When it is cancelled
    client.runs_cancel(run.runId)
    # Then it is cancelled at once, and the execution that held it is stopped, not left waiting out its 60 s
    assert wait_terminal(client, run.runId, timeout=10).status == "cancelled"
    assert _aborted(host, held)
    assert [e["type"] for e in _ports().events.read_events(run.runId)][-1] == "run.cancelled"


def _another_hold(run_id: str, generation: int) -> str:
    """A hold of ``run_id`` for 60 s on the hold machine, as a later task of it would start (``chain.go_on``)."""
    payload = {"runId": run_id, "next": "wait", "waitSeconds": 60, "parkedTimeoutSeconds": 60, "hops": 1}
    payload["chained"] = _machine_arn("run", run_id)
    arn = _ports().orchestrator.start(
        "run", run_id, payload, generation=generation, machine_arn=_machine_arn("run_hold", run_id)
    )
    return arn


def _aborted(host: Any, arn: str) -> bool:
    """Whether the execution ends ABORTED (the local stack shows a stop once the execution's thread has taken it)."""
    eventually(lambda: (described(host, arn) or {}).get("status") != "RUNNING", timeout=30)
    return (described(host, arn) or {}).get("status") == "ABORTED"


def _holding(host: Any, client: Any) -> tuple[str, str]:
    """A run holding for 60 s on the hold machine, and the execution that holds it (stored on the run)."""
    run_id = client.runs_create(
        CreateRunRequest(workflowId="conformance-replay-side-effect", inputs={"delayMs": 60_000})
    ).runId
    held = execution_arn("run_hold", run_id, 1)
    eventually(lambda: (described(host, held) or {}).get("status") == "RUNNING", timeout=30)
    eventually(lambda: _ports().runs.get_run(run_id).execution_arn == held, timeout=30)
    return run_id, held


def test_a_hold_stored_as_its_run_is_cancelled_is_stopped_whichever_write_comes_first(host, monkeypatch):
    from shared.engine import chain

    client = host.client(host.key_a)
    ports = _ports()
    # Given a holding run whose cancel has written its status, and a hold a task of it starts after that write
    run_id, held = _holding(host, client)
    assert ports.runs.update_status(run_id, "cancelling", allowed_from=("running",))
    late = _another_hold(run_id, 5)
    # When the task stores it: the store is refused (the run is being cancelled) and the task stops it itself
    chain.store_execution(ports, run_id, late)
    assert _aborted(host, late)
    assert ports.runs.get_run(run_id).execution_arn == held
    # and the cancel, finished, stops the one it read
    client.runs_cancel(run_id)
    assert _aborted(host, held)

    # Given another holding run, and a hold a task of it stores after its cancel read the run, before its status write
    other, first = _holding(host, client)
    racing = _another_hold(other, 5)
    write_status = ports.runs.update_status

    def stored_first(run_id: str, status: str, **kw: Any) -> bool:
        chain.store_execution(ports, run_id, racing)  # lands between the cancel's read and its write
        return write_status(run_id, status, **kw)

    monkeypatch.setattr(ports.runs, "update_status", stored_first)
    # When it is cancelled
    assert client.runs_cancel(other).status == "cancelled"
    # Then both executions are stopped: the one its read found and the one stored before its status write
    assert _aborted(host, first)
    assert _aborted(host, racing)
    assert [e["type"] for e in ports.events.read_events(other)][-1] == "run.cancelled"


def test_a_hold_stored_after_its_run_was_erased_is_stopped(host):
    from shared.engine import chain
    from shared.services.erasure import request_erasure

    client = host.client(host.key_a)
    ports = _ports()
    # Given a holding run, and a hold a task of it stores after the erasure read the run (before its delete)
    run_id, held = _holding(host, client)
    racing = _another_hold(run_id, 5)
    chain.store_execution(ports, run_id, racing)
    # When the erasure deletes the run item, it stops what the item named; a hold stored after the delete is stopped
    # by its task
    request_erasure(ports, run_id)
    assert _aborted(host, racing)
    late = _another_hold(run_id, 7)
    chain.store_execution(ports, run_id, late)
    assert _aborted(host, late)
    assert ports.runs.get_run(run_id) is None
    ports.orchestrator.stop(held)


def test_a_retried_task_starts_what_its_run_does_next_once(host):
    from shared.engine import chain

    # Given a completed run, and a chained task of it whose answer is delivered twice (a retried task)
    client = host.client(host.key_a)
    run_id = client.runs_create(CreateRunRequest(workflowId="conformance-noop")).runId
    assert wait_terminal(client, run_id).status == "completed"
    ports = _ports()
    hold, own = _machine_arn("run_hold", run_id), _machine_arn("run", run_id)
    told = chain.Chain(machine="run", hold_arn=hold, parked_timeout_s=60)
    first = ports.orchestrator.execution_name("run", run_id)
    # When its answer goes on (continue), twice, and a later task's wait is handed over twice, with other seconds
    for _ in range(2):
        out = chain.go_on(ports, run_id, {"runId": run_id, "next": "continue", "hops": 1}, told, first, own)
        assert (out["next"], out["renewed"]) == ("done", True)
    for seconds in (5, 4):
        answer = {"runId": run_id, "next": "wait", "waitSeconds": seconds, "hops": 2}
        chain.go_on(ports, run_id, answer, told, first + "-g1", own)
    # Then one next execution started (named by its generation), which found the run ended and entered its task only
    assert entered(host, execution_arn("run", run_id, 1)) == ["Advance"]
    # and one hold, the first delivery's (the second's start was that name's); the run had ended, so the hold was
    # not stored on it (the run still names its first execution) but stopped by the task that started it
    held = execution_arn("run_hold", run_id, 2)
    sfn = host.aws.client("stepfunctions")
    history = sfn.get_execution_history(executionArn=held, maxResults=1000)["events"]
    assert '"waitSeconds": 5' in history[0]["executionStartedEventDetails"]["input"]
    assert _ports().runs.get_run(run_id).execution_arn == execution_arn("run", run_id, 0)
    assert _aborted(host, held)
    assert described(host, execution_arn("run", run_id, 3)) is None
    assert [e["type"] for e in _ports().events.read_events(run_id)].count("run.completed") == 1


def test_an_execution_is_one_task(host):
    from shared.keys import FORK_SOURCE_SK

    # Given a completed workflow run
    client = host.client(host.key_a)
    src = client.runs_create(CreateRunRequest(workflowId="conformance-multi-node"))
    assert wait_terminal(client, src.runId).status == "completed"
    # When it is branched and replayed
    branch = client.runs_fork(src.runId, ForkRunRequest(fromSeq=3, mode="branch"))
    replay = client.runs_fork(src.runId, ForkRunRequest(fromSeq=0, mode="replay"))
    assert wait_terminal(client, branch.runId).status == "completed"
    assert wait_terminal(client, replay.runId).status == "completed"
    # Then every execution entered one state, its Advance task (decision 0191: chained, no state routes between
    # tasks): the run and the branch ended in their first (a branch builds nothing), each with no second execution
    execution = {r: str(_ports().runs.get_run(r).execution_arn) for r in (src.runId, branch.runId, replay.runId)}
    assert entered(host, execution[src.runId]) == ["Advance"]
    assert entered(host, execution[branch.runId]) == ["Advance"]
    assert (
        described(host, execution_arn("run", src.runId, 1)) is None
        and described(host, execution_arn("fork", branch.runId, 1)) is None
    )
    # and the replay's first task built what it resolves from (decision 0172) and started the next execution itself,
    # which advanced it to its end
    assert entered(host, execution[replay.runId]) == ["Advance"]
    assert entered(host, execution_arn("fork", replay.runId, 1)) == ["Advance"]
    assert described(host, execution_arn("fork", replay.runId, 2)) is None
    assert _ports().runs.get_aux(replay.runId, FORK_SOURCE_SK) is not None
    assert _ports().runs.get_aux(branch.runId, FORK_SOURCE_SK) is None
    # And an execution whose input names no hops and no index (a continued one) is one task too
    orchestrator = _ports().orchestrator
    for machine, run_id in (("run", src.runId), ("fork", branch.runId)):
        again = orchestrator.start(machine, run_id, {"runId": run_id}, generation=1)
        assert entered(host, again) == ["Advance"]


def test_a_run_a_build_from_before_created_starts_on_the_loop_it_expects(host, monkeypatch):
    from shared.engine import version
    from shared.services import runs
    from shared.services.common import Caller
    from shared.services.start_sweep import sweep
    from tests.integration.test_start_outbox import Killed, killed_after_write
    from tests.workflows import register_scripted_agent

    # Given a run's create by a build from before decision 0191 (it stamps engine version 1), cut after its first
    # write: the run and its start marker written, no execution started
    wid = register_scripted_agent(host.tenant_a, "chain-old")
    caller = Caller(tenant=host.tenant_a, subject_id="chain-test")
    req = CreateRunRequest(workflowId=wid, inputs={"script": {"calls": [], "answer": unique("old")}})
    with monkeypatch.context() as m:
        m.setattr(version, "STAMPED", 1)
        with killed_after_write(_ports(), 1) as kill, contextlib.suppress(Killed):
            runs.create(_ports(), caller, req)
    (run_id,) = kill.markers
    assert _ports().runs.get_run(run_id).data["build"]["engineVersion"] == 1
    # When this build's sweep starts it
    assert run_id in sweep(_ports(), grace_s=0).started
    # Then it runs on the machine that loops (a build from before may serve its tasks during a traffic shift, and
    # answers as a loop expects), not on the chained one, and completes there
    assert wait_terminal(host.client(host.key_a), run_id).status == "completed"
    held = str(_ports().runs.get_run(run_id).execution_arn)
    assert held.rsplit(":", 1)[0] == _machine_arn("run_hold", run_id).replace(":stateMachine:", ":execution:")
    assert entered(host, held) == ["Entry", "Advance", "Route", "Done"]
    assert described(host, execution_arn("run", run_id, 0)) is None


def test_a_queued_run_a_build_from_before_created_starts_on_the_loop_it_expects(host, monkeypatch):
    from shared.engine import version
    from shared.local.commands import seed
    from tests.integration.test_fair_compute import _status, _waiting_approval, _wire, runs_in_flight
    from tests.wire import raw

    # Given a tenant at its cap of 1 run in flight (one waiting for an approval), and a run a build from before
    # decision 0191 created behind it (stamped engine version 1), waiting for a slot
    tenant, key = unique("tenant-chain-q"), unique("key-chain-q")
    assert seed({key: tenant})
    with runs_in_flight(1):
        first = str(raw(host.base_url, "POST", "/runs", {"workflowId": "conformance-approval"}, key=key).json["runId"])
        eventually(lambda: _waiting_approval(first), timeout=60)
        with monkeypatch.context() as m:
            m.setattr(version, "STAMPED", 1)
            old = str(raw(host.base_url, "POST", "/runs", {"workflowId": "conformance-noop"}, key=key).json["runId"])
        assert _status(old) == ("pending", False)
        # When the first is cancelled and its slot given back
        assert raw(host.base_url, "POST", f"/runs/{_wire(first)}/cancel", {}, key=key).status == 200
        # Then the waiting run starts on the machine that loops, as its build's tasks expect, and completes there
        assert wait_terminal(host.client(key), old, timeout=60).status == "completed"
    held = str(_ports().runs.get_run(old).execution_arn)
    assert held.rsplit(":", 1)[0] == _machine_arn("run_hold", old).replace(":stateMachine:", ":execution:")
    assert entered(host, held) == ["Entry", "Advance", "Route", "Done"]
