"""Retention and erasure: a run's removal (explicit, or by TTL) erases all it owns and every copy derived from it.

Flow: ``DELETE /runs/{runId}`` (or the CLI) writes a tombstone, stops the execution and deletes the run
item. The DynamoDB stream REMOVE record of that item (and of a TTL expiry) reaches ``on_run_removed``,
which erases, in this order:

- the run's lineage: every fork made from it and every eval run served its recorded answers (``CHILD#`` links,
  written before either is answered) is erased the same way, so a fork of a fork, or of such an eval run, goes
  too; every idempotency record whose stored answer names it (``IDEM#``); every webhook dead-letter record
  naming it and the suite-version reference of an eval run (``HOSTITEM#`` links to host-table items); the
  ``OpenWOP-Dedup`` scope claim naming it, while it still does (``SCOPE#``);
- its effect-ledger rows (``LEDGER#<tenant>`` / ``<runId>#...``);
- the suite tasks that name it as their ``sourceRunId``, tombstoned in every suite version (``SUITELINK#`` links);
- the derived fixture copies it made from other runs, and every copy other runs made from it;
- its events, tool calls, auxiliary items and S3 objects.

After a restore, ``reapply_erasures`` erases again every restored run that has a tombstone (the restored table's, or
one copied in from the table the restore replaces): a restore to a point before an erasure brings the run back, its
tombstone from after that point does not come with it (docs/operations.md, "Restore").

The tombstone makes any late write for the run fail (every conditional write checks the run item or the
tombstone; S3 writes are undone when their DynamoDB write finds the run gone), and reads already treat an
expired or removed run as gone, so nothing depends on TTL timing. Erasing an id that never existed writes
nothing. What no condition holds (a task's plain pages, decision 0170; a fork's copied prefix) is deleted again by
the task when it next finds the run gone, and, for a run that had not ended, by an execution of its own once no
task can write anymore (``erase_late_writes``, decision 0179).
"""

from __future__ import annotations

from typing import Any

from shared import keys
from shared.errors import IdTenantMismatchError
from shared.ports import Ports
from shared.protocol.ids import tenant_of
from shared.services.common import Caller, decode_path_run_id

TOMBSTONE_DAYS = 400
BATCH_KEYS = 100  # run ids checked for a tombstone per read (BatchGetItem's most)


def erase_run(ports: Ports, caller: Caller, wire_run_id: str) -> None:
    run_id = decode_path_run_id(wire_run_id)
    if tenant_of(run_id) != caller.tenant:
        raise IdTenantMismatchError()
    request_erasure(ports, run_id)


def _tombstone(ports: Ports, run_id: str) -> None:
    ports.runs.write_tombstone(
        run_id, tenant_of(run_id), ports.clock.iso(), ports.clock.now_ms() // 1000 + TOMBSTONE_DAYS * 86400
    )


def request_erasure(ports: Ports, run_id: str, *, lineage: bool = False) -> None:
    """Idempotent: erasing an unknown or already erased run of the caller's tenant writes nothing.

    ``lineage``: the id comes from a lineage link (a fork whose run item may not exist yet): tombstone it
    anyway, so a create that is still in flight fails instead of leaving a fork of an erased run.
    """
    rec = ports.runs.get_run(run_id, include_expired=True)
    if rec is None and not lineage:
        return
    _tombstone(ports, run_id)
    if rec is not None and rec.execution_arn and not rec.terminal:
        ports.orchestrator.stop(rec.execution_arn)
    if rec is not None:
        stored = ports.runs.delete_run_item(run_id)
        if stored and stored != rec.execution_arn:  # a hold stored since the read above (decision 0191)
            ports.orchestrator.stop(stored)


def link_idempotency_record(ports: Ports, run_id: str, record_id: str) -> None:
    """Remember that an idempotency record's stored answer names ``run_id``, so its erasure removes it."""
    from shared.errors import RunGoneError

    try:
        ports.runs.put_aux(
            run_id,
            f"{keys.IDEM_PREFIX}{record_id}",
            {"recordId": record_id},
            ports.clock.now_ms() // 1000 + TOMBSTONE_DAYS * 86400,
        )
    except RunGoneError:
        ports.idempotency.delete_record(record_id)  # erased meanwhile: the hook has already run


def link_host_item(ports: Ports, run_id: str, pk: str, sk: str, expires_at: int) -> None:
    """Remember a host-table item (written just before) naming ``run_id`` (a webhook dead letter, an eval run's
    suite-version reference), so its erasure removes it; the run erased meanwhile: the hook may have run already, so
    the item goes now."""
    from shared.errors import RunGoneError

    try:
        ports.runs.put_aux(run_id, f"{keys.HOST_ITEM_PREFIX}{pk}#{sk}", {"pk": pk, "sk": sk}, expires_at)
    except RunGoneError:
        ports.linked.delete_linked(pk, sk)


def link_scope_claim(ports: Ports, run_id: str, scope_id: str, claim: dict[str, Any]) -> None:
    """Remember the ``OpenWOP-Dedup`` claim (written just before) that names ``run_id``, so its erasure releases it
    while the run still holds it; the run erased meanwhile: the hook may have run already, so it is released now."""
    from shared.errors import RunGoneError

    link = {"scopeId": scope_id, "claim": claim}
    try:
        expires_at = ports.clock.now_ms() // 1000 + TOMBSTONE_DAYS * 86400
        ports.runs.put_aux(run_id, f"{keys.SCOPE_CLAIM_PREFIX}{scope_id}", link, expires_at)
    except RunGoneError:
        ports.scope_claims.delete_claim(tenant_of(run_id), scope_id, if_equals=claim)


def on_run_removed(ports: Ports, run_id: str, *, live: bool = False) -> dict[str, int]:
    """The erasure hook (stream REMOVE of a run item, by TTL or explicit erasure). ``live``: the run had not ended
    (its removed item says so), so a task of it may still write: its late writes are erased too (``_after_tasks``)."""
    if not ports.runs.is_tombstoned(run_id):
        _tombstone(ports, run_id)
    if live:
        _after_tasks(ports, run_id)
    counts = {
        "events": 0,
        "toolCalls": 0,
        "aux": 0,
        "objects": 0,
        "derived": 0,
        "forks": 0,
        "ledger": 0,
        "idempotency": 0,
        "hostItems": 0,
        "suiteTasks": 0,
        "scopeClaims": 0,
    }
    for sk, _ in ports.runs.query_aux(run_id, keys.CHILD_PREFIX):
        request_erasure(ports, sk[len(keys.CHILD_PREFIX) :], lineage=True)
        counts["forks"] += 1
    for _, link in ports.runs.query_aux(run_id, keys.IDEM_PREFIX):
        ports.idempotency.delete_record(str(link["recordId"]))
        counts["idempotency"] += 1
    for _, link in ports.runs.query_aux(run_id, keys.HOST_ITEM_PREFIX):
        counts["hostItems"] += int(ports.linked.delete_linked(str(link["pk"]), str(link["sk"])))
    for _, link in ports.runs.query_aux(run_id, keys.SCOPE_CLAIM_PREFIX):
        claim = dict(link["claim"])
        counts["scopeClaims"] += ports.scope_claims.delete_claim(
            tenant_of(run_id), str(link["scopeId"]), if_equals=claim
        )
    counts["ledger"] = ports.ledger.delete_effects(tenant_of(run_id), run_id)
    # Suite tasks that name it as their source (SUITELINK# links, written before the version): tombstoned.
    from shared.services.suites import on_source_erased

    counts["suiteTasks"] = on_source_erased(ports, run_id)
    # Copies this run made from other sources are listed in its plan; delete them too.
    plan = ports.runs.get_aux(run_id, keys.EVAL_PLAN_SK)
    for key in (plan or {}).get("derivedKeys", []):
        counts["derived"] += ports.blobs.delete_prefix(key)
    counts["events"] = ports.events.delete_all(run_id)
    counts["toolCalls"] = ports.tool_calls.delete_all(run_id)
    counts["aux"] = ports.runs.delete_aux_all(run_id)
    counts["objects"] = ports.blobs.delete_prefix(keys.run_prefix(run_id))
    counts["derived"] += ports.blobs.delete_prefix(keys.derived_prefix(run_id))
    from shared.services.admission import run_ended

    run_ended(ports, run_id)  # a run erased in flight gives back its tenant's slot (decision 0160)
    return counts


LATE_WRITES = "late"  # the purpose naming the execution that erases a run's late writes (``<runId>-late``)


def _after_tasks(ports: Ports, run_id: str) -> None:
    """A run erased while a task of it may still write: a task put what no condition on its run item held (its
    plain pages, decision 0170; a fork's copied prefix). A task that reaches its next transaction finds the run
    gone and deletes its log again; one that died first never does. So an execution of the run state machine of its
    own (the timer machine's, named for the purpose, once per run: decision 0189) waits until no task can write
    anymore (``TASK_WRITES_END_S`` after now: a task's function times out, its execution was stopped), then
    ``erase_late_writes`` (decision 0179). Its input holds the run id, as the run's own executions do."""
    from shared.manifest import TASK_WRITES_END_S
    from shared.services.start_outbox import timer_input

    end = ports.clock.iso(ports.clock.now_ms() + TASK_WRITES_END_S * 1000)
    payload = timer_input(run_id, end, {"runId": run_id, "lateWrites": True})
    ports.orchestrator.start("timer", run_id, payload, purpose=LATE_WRITES)


def erase_late_writes(ports: Ports, run_id: str) -> bool:
    """Once no task of an erased run can write: its log and objects deleted again (whatever a task put after its
    erasure). Only a run with a tombstone; returns whether it had one."""
    from shared.engine.kernel import discard_late_writes

    if not ports.runs.is_tombstoned(run_id):
        return False
    discard_late_writes(ports, run_id)
    return True


def erase_now(ports: Ports, run_id: str, *, tombstone: bool = True) -> None:
    """Synchronous erasure (a failed create's compensation): no stream round trip needed."""
    ports.runs.delete_run_item(run_id)
    on_run_removed(ports, run_id)
    if not tombstone:
        ports.runs.delete_tombstone(run_id)


def reapply_erasures(ports: Ports, tombstones_from: str | None = None) -> dict[str, int]:
    """Erase again every run of the (restored) runs table that has an erasure tombstone, first copying in every
    tombstone of ``tombstones_from`` (the runs table the restore replaces, which holds the erasures made after the
    restore point). Idempotent; reads the whole runs table (an operator's command after a restore)."""
    copied = ports.runs.copy_tombstones(tombstones_from) if tombstones_from else 0
    erased = 0
    page: list[str] = []
    for run_id in ports.runs.run_ids():
        page.append(run_id)
        if len(page) == BATCH_KEYS:
            erased += _erase_tombstoned(ports, page)
            page = []
    erased += _erase_tombstoned(ports, page) if page else 0
    return {"tombstonesCopied": copied, "runsErased": erased}


def _erase_tombstoned(ports: Ports, run_ids: list[str]) -> int:
    gone = sorted(ports.runs.tombstoned(run_ids))
    for run_id in gone:
        erase_now(ports, run_id)
    return len(gone)
