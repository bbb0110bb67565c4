"""Retention and erasure: a run's removal (explicit, or by TTL) erases all it owns and every copy derived from it.

Flow: ``DELETE /runs/{runId}`` (or the CLI) writes a tombstone, stops the execution and deletes the run
item. The DynamoDB stream REMOVE record of that item (and of a TTL expiry) reaches ``on_run_removed``,
which deletes the events, tool calls, auxiliary items, S3 objects under the run, and every derived
fixture copy made from it. The tombstone makes any late write for the run fail (conditional writes
check it), and reads already treat an expired or removed run as gone, so nothing depends on TTL timing.
"""

from __future__ import annotations

from shared import keys
from shared.errors import IdTenantMismatchError
from shared.ports import Ports
from shared.protocol.ids import tenant_of
from shared.services.common import Caller, decode_path_run_id

TOMBSTONE_DAYS = 400


def erase_run(ports: Ports, caller: Caller, wire_run_id: str) -> None:
    run_id = decode_path_run_id(wire_run_id)
    if tenant_of(run_id) != caller.tenant:
        raise IdTenantMismatchError()
    request_erasure(ports, run_id)


def _tombstone(ports: Ports, run_id: str) -> None:
    ports.runs.write_tombstone(run_id, tenant_of(run_id), ports.clock.iso(),
                               ports.clock.now_ms() // 1000 + TOMBSTONE_DAYS * 86400)


def request_erasure(ports: Ports, run_id: str) -> None:
    """Idempotent: erasing an unknown or already erased run of the caller's tenant is a no-op."""
    rec = ports.runs.get_run(run_id)
    _tombstone(ports, run_id)
    if rec is not None and rec.execution_arn and not rec.terminal:
        ports.orchestrator.stop(rec.execution_arn)
    ports.runs.delete_run_item(run_id)


def on_run_removed(ports: Ports, run_id: str) -> dict[str, int]:
    """The erasure hook (stream REMOVE of a run item, by TTL or explicit erasure)."""
    if not ports.runs.is_tombstoned(run_id):
        _tombstone(ports, run_id)
    counts = {"events": 0, "toolCalls": 0, "aux": 0, "objects": 0, "derived": 0}
    # Copies this run made from other sources are listed in its plan; delete them too.
    plan = ports.runs.get_aux(run_id, keys.EVAL_PLAN_SK)
    for key in (plan or {}).get("derivedKeys", []):
        counts["derived"] += ports.blobs.delete_prefix(key)
    counts["events"] = ports.events.delete_all(run_id)
    counts["toolCalls"] = ports.tool_calls.delete_all(run_id)
    counts["aux"] = ports.runs.delete_aux_all(run_id)
    counts["objects"] = ports.blobs.delete_prefix(keys.run_prefix(run_id))
    counts["derived"] += ports.blobs.delete_prefix(keys.derived_prefix(run_id))
    return counts


def erase_now(ports: Ports, run_id: str, *, tombstone: bool = True) -> None:
    """Synchronous erasure (a failed create's compensation): no stream round trip needed."""
    ports.runs.delete_run_item(run_id)
    on_run_removed(ports, run_id)
    if not tombstone:
        ports.runs.delete_tombstone(run_id)
