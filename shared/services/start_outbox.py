"""The start outbox: a run written but never started is started or failed by a sweep, never left ``pending``.

A create writes the run's marker (``ports.starts``) in the transaction that writes the run (``begin``: the run and
its marker together or neither) and marks it ready once all the execution needs is stored (``ready``). Once the
execution is started, the append that opens the run's own log deletes it in its transaction (``workflowrun``'s
appender; decision 0186); a run no Advance task appends (an eval run, a session) has it cleared by its create
(``after_start``). A create cut anywhere in between (a Lambda timeout or a lost instance on AWS, a killed process
locally) leaves the marker, and a sweep (``start_sweep``) settles it once it is older than the grace period: the
scheduled ``sweep_starts`` function on AWS, the resume at startup locally (``shared.local.resume``).

Settling is idempotent: the execution's name is derived from the run id (``execution_name``, hashed when too long),
so starting a run whose execution already exists answers that execution; a run whose marker is not ready (its plan,
or a session's first events, never stored) fails ``persistence_failed`` through the engine's terminal path
(``kernel.fail_run``: a ``run.failed`` event, so webhooks and streams see it as any failure). Decision 0150.
"""

from __future__ import annotations

from typing import Any

from shared.ports import PendingStart, Ports, RunRecord, StagedWrite

# --------------------------------------------------------------------------- the create's side


def begin(ports: Ports, run_id: str, machine: str, expires_at: int, *, ready: bool) -> tuple[PendingStart, StagedWrite]:
    """The run's marker (``ready`` when the run item alone is all it needs), and its write for the transaction that
    creates the run (``RunStore.create_run``'s ``staged``)."""
    start = PendingStart(run_id=run_id, machine=machine, ready=ready, at_ms=ports.clock.now_ms())
    return start, ports.starts.stage_start(start, expires_at=expires_at)


def ready(ports: Ports, start: PendingStart, expires_at: int) -> None:
    """Everything the run's execution needs is stored: a sweep may start it."""
    ports.starts.put_start(
        PendingStart(run_id=start.run_id, machine=start.machine, ready=True, at_ms=start.at_ms), expires_at=expires_at
    )


def first_execution(ports: Ports, machine: str, run_id: str) -> dict[str, Any]:
    """What a create stores of the execution its start will name (``RunRecord`` fields): the stamp of the task
    before that execution's first, so its first task may read the run eventually consistently (decision 0173), and
    its ARN, so the start writes nothing after it (decision 0175)."""
    from shared.engine.stamps import task_stamp

    return {
        "task_stamp": task_stamp(ports.orchestrator.execution_name(machine, run_id), -1),
        "execution_arn": ports.orchestrator.execution_arn(machine, run_id),
    }


def started(ports: Ports, rec: RunRecord, arn: str) -> None:
    """The run's execution is started as ``arn``: stored on the run item unless its create stored it already (a
    create knows the ARN its start gives: decision 0175; a run created before did not)."""
    if arn != rec.execution_arn:
        from shared.engine.chain import store_execution

        store_execution(ports, rec.run_id, arn)


def opened_by_task(rec: RunRecord) -> bool:
    """Whether an Advance task appends the run's first own events, and with them deletes its marker: a workflow
    run or a workflow run's fork (an eval run's trials and a session's gateway append theirs)."""
    return rec.kind == "workflow"


def after_start(ports: Ports, rec: RunRecord) -> None:
    """The run's execution is started: its marker cleared now, unless its first append deletes it."""
    if not opened_by_task(rec):
        done(ports, rec.run_id)


def done(ports: Ports, run_id: str) -> None:
    """The execution is started (or the run erased): clear the marker. A failure here only leaves the marker for
    the sweep, which finds the execution and clears it: it never fails the create."""
    try:
        ports.starts.clear_start(run_id)
    except Exception:  # noqa: BLE001, S110 - the sweep clears what is left
        pass


# --------------------------------------------------------------------------- what a sweep and a resume need


def machine_of(rec: RunRecord) -> str:
    """The state machine a run executes on: a session's execution only waits for its expiry (decision 0189)."""
    if rec.kind == "session":
        return "timer"
    if rec.kind == "eval" and not rec.data.get("fork"):
        return "eval"
    return machine_for(rec, "fork" if rec.data.get("fork") else "run")


def machine_for(rec: RunRecord, machine: str) -> str:
    """The machine ``rec`` starts on when ``machine`` was named for it: a run or fork a build from before decision
    0191 created (stamped engine version 1: a sweep's, a queue's or a restart's start of it) on its hold machine,
    which loops as that build's tasks expect; the rest on ``machine``."""
    from shared.engine.version import STAMPED, run_engine_version

    if machine in ("run", "fork") and run_engine_version(rec.data) < STAMPED:
        return machine + "_hold"
    return machine


def payload_of(ports: Ports, rec: RunRecord) -> dict[str, Any]:
    """The input of the run's execution, as its create gave it."""
    machine = machine_of(rec)
    if machine == "timer":  # a session's execution waits for its expiry
        return session_expiry(ports, rec.run_id, int(rec.data["session"]["expiresAtMs"]))
    if rec.data.get("fork"):  # its first task builds the fork's index, or (a branch builds none) advances
        from shared.engine.forkindex import needs_index

        return {"runId": rec.run_id, "index": needs_index(rec)}
    return {"runId": rec.run_id}


def session_expiry(ports: Ports, run_id: str, expires_at_ms: int) -> dict[str, Any]:
    """The input of a session's execution (the timer machine's): at its expiry, fail it ``session_expired`` unless
    it has ended (decision 0143)."""
    return timer_input(run_id, ports.clock.iso(expires_at_ms), {"runId": run_id, "error": {"Error": "SessionExpired"}})


def timer_input(run_id: str, at: str, task: dict[str, Any]) -> dict[str, Any]:
    """The input of an execution of the timer machine (decision 0189): it waits until ``at`` (ISO 8601), then gives
    ``fail_run`` the ``task``."""
    return {"runId": run_id, "at": at, "task": task}


def plan_missing(ports: Ports, rec: RunRecord) -> bool:
    """An eval run (or an eval run's fork) that never had its plan stored: its trials could never run."""
    if rec.kind != "eval":
        return False
    from shared.engine import evalplan
    from shared.errors import RunGoneError

    try:
        evalplan.load_plan(ports, rec.run_id, cached=False)
    except RunGoneError:
        return True
    return False


def fail_unstarted(ports: Ports, run_id: str) -> bool:
    """Fail a run whose create stopped before it was whole: ``persistence_failed``, by the engine's terminal path."""
    from shared.engine import kernel

    return bool(kernel.fail_run(ports, run_id, {"Error": kernel.START_INTERRUPTED}).get("failed"))
