"""After a restart on kept state: start again the state machines of the runs that had not ended.

A kept data folder holds the runs, their logs and their state, but no Step Functions execution (those lived in the
process that stopped). Every run, fork and eval run whose status is not terminal gets a new execution of its state
machine (the next generation of its execution name), whose first task re-reads the run and goes on from where its
log ends, as a task retried after a crash does on AWS: nothing is appended twice, and a ``core.http`` effect the
stopped process claimed is sent again only once its claim is stale (300 s; decision 0131). A paused or waiting-for-approval run parks again on a new task token; a run being cancelled is
cancelled (``runs.finish_cancel``), as the cancel request would have finished it. Before them, the start outbox is
swept as the scheduled sweep does on AWS (``shared.services.start_sweep``): a run whose create was cut is started,
or failed ``persistence_failed`` when what it needs was never stored (an eval's plan), never resumed forever.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from shared.ports import Ports
from shared.protocol import codes as c
from shared.storage import schema


@dataclass
class Resumed:
    runs: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # could not be restarted (tried again at the next start)
    failed_starts: list[str] = field(default_factory=list)  # creates cut before the run was whole: failed for good

    def __len__(self) -> int:
        return len(self.runs) + len(self.cancelled) + len(self.failed_starts)


def unfinished_runs(table: str, writes: AbstractContextManager[Any]) -> list[str]:
    """The ids of every run item whose status is not terminal. Read from moto's table in this process, holding
    ``writes`` (the journal's lock: no write changes the table while it is read): a Scan through the API evaluates
    its filter in Python page by page and took 92 s (22 s CPU) over 10,000 stored runs; this takes well under a
    second."""
    from shared.local.moto_data import dynamodb_table

    found = []
    with writes:
        for item in dynamodb_table(table).all_items():
            sk, status = item.attrs.get("sk"), item.attrs.get("status")
            if (
                sk is not None
                and sk.value == schema.RUN_SK
                and status is not None
                and status.value not in c.TERMINAL_STATUSES
            ):
                found.append(str(item.attrs["pk"].value))
    return sorted(found)


def resume_unfinished(ports: Ports, writes: AbstractContextManager[Any]) -> Resumed:
    from shared.engine.chain import store_execution
    from shared.engine.stamps import execution_generation
    from shared.services import start_outbox as outbox
    from shared.services.runs import finish_cancel
    from shared.services.start_sweep import sweep

    # First the start outbox, with no grace: the process whose creates were in flight is gone. A run it left
    # written but not started is started, or failed when its create stopped before it was whole (decision 0150).
    swept = sweep(ports, grace_s=0)
    done = Resumed(runs=list(swept.started), failed_starts=list(swept.failed))
    for run_id in unfinished_runs(ports.settings.runs_table, writes):
        rec = ports.runs.get_run(run_id)
        # a marker the sweep only cleared (the run had an execution before the stop) leaves the run to resume
        if rec is None or rec.terminal or run_id in swept.started or run_id in swept.failed:
            continue
        if run_id in swept.queued:  # waits for a slot of its tenant: started when one frees (decision 0160)
            continue
        if rec.status == "cancelling":
            finish_cancel(ports, run_id)
            done.cancelled.append(run_id)
            continue
        if outbox.plan_missing(ports, rec):  # an eval cut before its plan by a host older than the outbox
            outbox.fail_unstarted(ports, run_id)
            done.failed_starts.append(run_id)
            continue
        previous = (rec.execution_arn or "").rsplit(":", 1)[-1]
        payload = outbox.payload_of(ports, rec)
        try:
            arn = ports.orchestrator.start(
                outbox.machine_of(rec), run_id, payload, generation=execution_generation(previous) + 1
            )
            store_execution(ports, run_id, arn)
        except Exception:  # noqa: BLE001 - one run that cannot start must not keep the host from starting
            done.failed.append(run_id)
            continue
        done.runs.append(run_id)
    return done
