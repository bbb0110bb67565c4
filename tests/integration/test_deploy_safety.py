"""What a deploy may do to runs in flight, on the local stack: a run records the build that started it; a build of
another engine version refuses to advance it (Step Functions retries that); a run parked longer than
``parkedTimeout`` fails ``run_timeout`` and its execution ends without failing."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from openwop_client.types import CreateRunRequest

from tests.helpers import unique
from tests.wire import wait_terminal


def _ports():
    from shared.wiring import get_ports

    return get_ports()


@pytest.fixture()
def parked_timeout_2s(host) -> Iterator[None]:
    """The run and fork machines with a 2 s parkedTimeout (their definitions substituted again), then as before."""
    saved = os.environ.get("PARKED_TIMEOUT_SECONDS")
    os.environ["PARKED_TIMEOUT_SECONDS"] = "2"
    host.aws.bootstrap()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PARKED_TIMEOUT_SECONDS", None)
        else:
            os.environ["PARKED_TIMEOUT_SECONDS"] = saved
        host.aws.bootstrap()


def test_a_run_waiting_past_the_parked_timeout_fails_run_timeout_and_its_execution_succeeds(host, parked_timeout_2s):
    from shared.local.environment import state_machine_arn
    from shared.manifest import STATE_MACHINES

    # Given a run that waits on an approval nobody gives (it parks on its task token)
    client = host.client(host.key_a)
    run_id = client.runs_create(CreateRunRequest(workflowId="conformance-approval")).runId
    # When its Park task waits longer than parkedTimeout (2 s here)
    snap = wait_terminal(client, run_id, timeout=60)
    # Then the run failed run_timeout, once, with its log ending there
    assert (snap.status, snap.error.code) == ("failed", "run_timeout")
    events = _ports().events.read_events(run_id)
    assert [e["type"] for e in events].count("run.failed") == 1 and events[-1]["type"] == "run.failed"
    assert "run.started" in [e["type"] for e in events]
    # and its execution ended as a success (ParkedTimeout goes to Done: no ExecutionsFailed alarm)
    sfn = host.aws.client("stepfunctions")
    arn = _ports().runs.get_run(run_id).execution_arn
    deadline = time.monotonic() + 30
    while (status := sfn.describe_execution(executionArn=arn)["status"]) == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert status == "SUCCEEDED"
    # on the hold machine, where a chained run parks (decision 0191), stored as the execution a cancel would stop
    hold = next(m for m in STATE_MACHINES if m.key == "run_hold")
    assert arn.startswith(state_machine_arn(hold).replace(":stateMachine:", ":execution:") + ":")


def test_a_run_records_its_build_and_only_a_build_of_its_engine_version_advances_it(host, monkeypatch):
    from shared.engine import kernel
    from shared.engine.runkinds import RUN_KINDS
    from shared.engine.version import APPENDS, STAMPED, EngineVersionMismatchError
    from shared.ports import RunRecord
    from shared.services.common import Caller

    ports = _ports()
    # Given a run started through the API: it records this build, engine version and way of appending
    client = host.client(host.key_a)
    run_id = client.runs_create(CreateRunRequest(workflowId="conformance-noop")).runId
    assert wait_terminal(client, run_id).status == "completed"
    assert ports.runs.get_run(run_id).data["build"] == {
        "buildId": ports.settings.build_id,
        "engineVersion": STAMPED,  # 2: its executions are chained (decision 0191)
        "appends": APPENDS,
    }
    # which a build from before decision 0191 (reading engine version 1 only) refuses: it would answer a chained
    # machine as if it looped, and the run's execution would end with the run unfinished
    from shared.engine import version

    with monkeypatch.context() as m:
        m.setattr(version, "READS", frozenset({version.ENGINE_VERSION}))
        with pytest.raises(EngineVersionMismatchError):
            version.check_engine(ports.runs.get_run(run_id).data)
    # And a run item written by a (future) build of engine version STAMPED + 1, not started
    later = RunRecord(
        run_id=f"tenant-a/{unique('r-engine')}",
        tenant="tenant-a",
        status="pending",
        last_seq=-1,
        created_at=ports.clock.iso(),
        expires_at=ports.clock.now_ms() // 1000 + 3600,
        data={
            "kind": "workflow",
            "owner": Caller("tenant-a", "tests").owner,  # as an API caller's run: a listing shows it whole
            "workflowId": "conformance-noop",
            "build": {"buildId": "next", "engineVersion": STAMPED + 1},
        },
    )
    ports.runs.create_run(later)  # the store writes the creation facts as given: that build's stamp
    # When this build's Advance task meets it
    with pytest.raises(EngineVersionMismatchError):
        kernel.advance(ports, later.run_id, RUN_KINDS)
    # Then it refused before writing anything (the state machines retry this error past a traffic shift)
    stored = ports.runs.get_run(later.run_id)
    assert (stored.status, stored.last_seq) == ("pending", -1)
    assert ports.events.read_events(later.run_id) == []
