"""Chained executions (decision 0191): a run's execution is one Advance task, and the task starts the next one.

A Step Functions execution bills a state transition for every state it enters. A run's machine that loops
(``Advance`` -> ``Route`` -> ``Advance`` ... ``Done``) makes a run that ends in one task pay three, two of them to
serve the runs that go on. On the chained machines (``statemachines/*-chain.asl.json``) an execution enters one
state, its ``Advance`` task, and ends with it; the task itself starts what the run does next:

- ``continue``: the next execution of the chained machine (``machine_arn``), generation n + 1 of the run's execution
  name (named, so a retried task starts it once: a second start of the same name is ``ExecutionAlreadyExists``,
  taken as started);
- ``wait`` or ``park``: generation n + 1 on the hold machine (``statemachines/run.asl.json`` or ``fork-replay``),
  told the answer, which it holds on at once (its ``Entry`` choice), then one task (``AdvanceOnce``, decision 0192)
  told its place (``hops``) and the machine it goes on in (``chained``: this one's ARN, ``machine_arn``; the hold
  machine cannot name it, since this one names the hold machine), which does as this one does: so a hold is three
  states (``Entry``, ``HoldOnce`` or ``ParkOnce``, ``AdvanceOnce``). Its ARN is stored on the run, so a cancel or an
  erasure stops the execution that holds it;
- ``done``: nothing.

A continuing execution's ARN is not stored: a cancel writes the run's status, which the next task reads before it
writes anything (decision 0173), and a task in flight is not stopped by a stop either. Every task of a chained run
is stamped as the task ``hops`` of the run's first execution (``task_stamp(name0, hops)``), so the next task, in
whichever execution, expects its predecessor's stamp as a looping execution's tasks do (decisions 0173, 0177).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.engine.stamps import execution_generation
from shared.ports import Ports


@dataclass(frozen=True)
class Chain:
    """What a chained machine tells its task (the ASL's ``chain``): the machine's key (``run`` or ``fork``), its
    hold machine's ARN, and the seconds a parked run may wait there (the operator's ``parkedTimeout``)."""

    machine: str
    hold_arn: str
    parked_timeout_s: int


def go_on(
    ports: Ports, run_id: str, out: dict[str, Any], chain: Chain, execution: str, machine_arn: str
) -> dict[str, Any]:
    """Start what the run does after this task (``out``: its answer); this execution ends (``done``)."""
    nxt = str(out.get("next", "done"))
    if nxt == "done":
        return out
    after = execution_generation(execution) + 1
    if nxt == "continue":
        payload = {"runId": run_id, "hops": int(out.get("hops", 0))}
        ports.orchestrator.start(chain.machine, run_id, payload, generation=after, machine_arn=machine_arn)
    else:  # wait or park: held by the hold machine, whose one task after it goes on here (decision 0192)
        payload = {
            "runId": run_id,
            "next": nxt,
            "waitSeconds": int(out.get("waitSeconds", 0)),
            "parkedTimeoutSeconds": chain.parked_timeout_s,
            "hops": int(out.get("hops", 0)),
            "chained": machine_arn,
        }
        # named as the run's executions are (a name is unique per machine): generation n + 1 of the run's
        arn = ports.orchestrator.start(chain.machine, run_id, payload, generation=after, machine_arn=chain.hold_arn)
        store_execution(ports, run_id, arn)  # what a cancel or an erasure stops
    return {"runId": run_id, "next": "done", "waitSeconds": 0, "hops": out.get("hops", 0), "renewed": True}


def store_execution(ports: Ports, run_id: str, arn: str) -> None:
    """Store ``arn`` as the run's execution, what a cancel or an erasure stops; if the run is being cancelled, has
    ended or is gone, stop it here instead. A cancel writes the status, then stops the execution stored by then (and
    an erasure the one its delete removed): an execution stored before that write is theirs to stop, one started after
    it is this one's (the store's condition refuses it)."""
    if not ports.runs.set_execution(run_id, arn):
        ports.orchestrator.stop(arn)
