"""Step Functions task: advance a run (workflow or fork) by many steps; see shared.engine.kernel.advance."""

from __future__ import annotations

from typing import Any

from functions._common import task_input as ti
from functions._common.observability import count, count_tools, task_handler
from shared.engine import chain as chain_of
from shared.engine import kernel
from shared.engine.runkinds import RUN_KINDS
from shared.engine.tools import ToolTally
from shared.services import admission
from shared.wiring import get_ports


@task_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    run_id = ti.text(event, "runId")
    state = ti.mapping(event, "state", {})  # the state the task is entered with: its execution's input first
    hops = ti.integer(state, "hops", 0)  # Advance tasks this execution has made (continue-as-new after a setting)
    execution = ti.text(event, "execution", "")  # this execution's name (its generation)
    machine_arn = ti.text(event, "stateMachine", "")  # the machine it runs on: a continuation starts there
    chain = _chain(ti.mapping(event, "chain", None))  # a chained machine's task starts the next execution (0191)
    if ti.flag(state, "index", False):  # a fork's first task builds its source index (decisions 0172, 0189)
        from shared.engine import forkindex

        indexed = {**forkindex.index_fork(get_ports(), run_id, execution), "hops": hops}
        if chain is None:
            return indexed
        return chain_of.go_on(get_ports(), run_id, indexed, chain, execution, machine_arn)
    tally = ToolTally()
    holds_slot = ti.flag(event, "holdsSlot", True)
    release = admission.stage_release(get_ports(), run_id, holds_slot=holds_slot)  # with its end (decision 0183)
    out = kernel.advance(
        get_ports(),
        run_id,
        RUN_KINDS,
        hops=hops,
        execution=execution,
        machine_arn=machine_arn,
        tally=tally,
        release=release,
        chain=chain,
    )
    count_tools(tally)
    released = bool(out.pop(kernel.RELEASED, False))  # given back by the append that ended the run (decision 0183)
    if out.get("next") == "done" and not out.get("renewed"):
        count("RunsFinished")
        if not released:
            _ended(run_id, holds_slot)
    return out


def _chain(given: dict[str, Any] | None) -> chain_of.Chain | None:
    """What a chained machine's task is told (``chain``: its machine's key, its hold machine, the parked timeout);
    None on a machine that loops (a hold machine, or a machine of a build from before decision 0191)."""
    if given is None:
        return None
    return chain_of.Chain(
        machine=ti.text(given, "machine"),
        hold_arn=ti.text(given, "hold"),
        parked_timeout_s=ti.integer(given, "parkedTimeoutSeconds"),
    )


def _ended(run_id: str, holds_slot: bool) -> None:
    """The run ended (or is being cancelled): its tenant's slot back, its waiting runs started (decision 0160); a
    fork's machine says its runs hold none (``holdsSlot``)."""
    if admission.run_ended(get_ports(), run_id, holds_slot=holds_slot) == "deferred":
        count("SlotReleaseDeferred")
