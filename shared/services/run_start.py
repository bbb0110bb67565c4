"""Starting a run: the checks every create shares, the run item, its execution.

Both kinds of create call it: a workflow run (``runs``) and an eval run (``evals``); a fork (``forks``) mints its
run id and expiry here. It imports neither of them, so ``runs`` may dispatch an eval create to ``evals``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shared.errors import (
    ForbiddenError,
    ItemTooLargeError,
    ProtocolError,
    ResidencyUnavailableError,
    ServiceUnavailableError,
    StagedRefusedError,
    ValidationError,
)
from shared.ports import Ports, RunRecord, Span
from shared.services import admission
from shared.services import start_outbox as outbox
from shared.services.common import Caller, links

if TYPE_CHECKING:
    from shared.protocol.models import CreateRunRequest


@dataclass
class Created:
    status: int
    body: dict[str, Any]


def expires_at(ports: Ports) -> int:
    return ports.clock.now_ms() // 1000 + int(ports.settings.retention_days) * 86400


def new_run_id(ports: Ports, tenant: str) -> str:
    return f"{tenant}/r-{ports.ids.ulid().lower()}"


def common_checks(caller: Caller, req: CreateRunRequest) -> None:
    if req.tenantId is not None and req.tenantId != caller.tenant:
        raise ForbiddenError("The body tenantId is not the credential's tenant.")
    if req.callbackUrl is not None:
        raise ValidationError("This host does not deliver callbacks.", {"field": "callbackUrl"})
    if req.residency is not None:
        raise ResidencyUnavailableError()


def stamped(ports: Ports, data: dict[str, Any]) -> dict[str, Any]:
    """A new run's creation facts with the build that starts it (``data.build``: its id and engine version), so
    only a build of that engine version advances it (``shared.engine.version``). Part of the run item's one
    ``PutItem``: no extra request."""
    from shared.engine.version import BUILD_KEY, build_stamp

    return {**data, BUILD_KEY: build_stamp(ports.settings.build_id)}


def run_span(ports: Ports, run_id: str, tenant: str, data: dict[str, Any]) -> AbstractContextManager[Span]:
    """The run's span, around its creation: the root of the run's trace (``shared.engine.spans``)."""
    from shared.engine import spans

    fork = data.get("fork") or {}
    return ports.tracing.span(
        spans.RUN_SPAN,
        {
            spans.RUN_ID: run_id,
            spans.TENANT: tenant,
            "openwop.run.kind": str(data.get("kind", "workflow")),
            "openwop.run.mode": str(fork.get("mode", "live")),
        },
    )


def traced(ports: Ports, data: dict[str, Any]) -> dict[str, Any]:
    """A new run's creation facts with the trace context of its open span (``run_span``), which every task of the
    run joins; never a source run's (a fork copies its source's facts). Tracing off: no context."""
    from shared.engine.spans import TRACE_KEY

    out = {k: v for k, v in data.items() if k != TRACE_KEY}
    tp = ports.tracing.current()
    if tp:
        out[TRACE_KEY] = tp
    return out


def start_run(
    ports: Ports,
    caller: Caller,
    data: dict[str, Any],
    machine: str,
    *,
    before_start: Callable[[RunRecord], None] | None = None,
) -> Created:
    """Write the run item, then start its execution; a failed start leaves no run behind, a create cut short (a
    crash, a timeout) one the start outbox's sweep starts or fails (``start_outbox``).

    ``before_start(record)`` writes what the execution needs under the new run id (an eval run's plan and its
    derived fixture copies) after the run item exists and before the execution starts; if it fails, the run
    and whatever it wrote are erased like a failed start.
    """
    run_id = new_run_id(ports, caller.tenant)
    with run_span(ports, run_id, caller.tenant, data):
        return _start_run(ports, caller, run_id, data, machine, before_start)


def _start_run(
    ports: Ports,
    caller: Caller,
    run_id: str,
    data: dict[str, Any],
    machine: str,
    before_start: Callable[[RunRecord], None] | None,
) -> Created:
    from shared.engine.state import new_state

    now = ports.clock.iso()
    rec = RunRecord(
        run_id=run_id,
        tenant=caller.tenant,
        status="pending",
        last_seq=-1,
        created_at=now,
        data=traced(ports, stamped(ports, {k: v for k, v in data.items() if v is not None})),
        state=new_state(),
        expires_at=expires_at(ports),
        **outbox.first_execution(ports, machine, run_id),  # decisions 0173, 0175
    )
    # With the start outbox's marker: a create cut anywhere below is started or failed by a sweep (decisions 0150,
    # 0186); and its tenant's slot (decision 0182): none free, written without one, to wait. Its id was drawn just
    # now, so no tombstone can name it.
    pending, marker = outbox.begin(ports, run_id, machine, rec.expires_at, ready=before_start is None)
    take = admission.stage_take(ports, rec, machine)
    taken: bool | None = True if take else None
    try:
        ports.runs.create_run(rec, fresh=True, staged=[marker, *take])
    except StagedRefusedError:
        ports.runs.create_run(rec, fresh=True, staged=[marker])
        taken = False
    try:
        if before_start is not None:
            before_start(rec)
            outbox.ready(ports, pending, rec.expires_at)
        # its execution; no free slot: the run waits pending, its marker kept (decision 0160)
        started = admission.admit(ports, rec, machine, pending.at_ms, taken=taken)
    except Exception as exc:
        from shared.services.erasure import erase_now

        erase_now(ports, run_id, tombstone=False)  # gives back a slot it took (``on_run_removed``)
        outbox.done(ports, run_id)
        if isinstance(exc, ProtocolError | ItemTooLargeError):
            raise  # a refusal found while writing (an erased fixture source, an oversized item): the caller's answer
        raise ServiceUnavailableError() from exc
    if started:
        outbox.after_start(ports, rec)
    return Created(201, {"runId": run_id, "status": "pending", **links(run_id)})
