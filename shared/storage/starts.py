"""The start outbox on the host table: one marker per run being created, ``STARTS#<shard>`` / ``<runId>``.

A marker is written in the transaction that creates its run and lives until the run's first append (or, for a run
no Advance task appends, until its execution is started): milliseconds, as a rule (decision 0186). So each shard's
partition holds only the creates in flight and the stranded ones: a sweep reads ``SHARDS`` small partitions, never
the runs. The shard is a hash of the run id, so a burst of creates spreads its marker writes and deletes over
``SHARDS`` partitions. The host table has no stream: a marker's delete invokes nothing."""

from __future__ import annotations

import hashlib

from shared.ports import HostStore, PendingStart, StagedWrite

STARTS_PREFIX = "STARTS#"
SHARDS = 16


def _partition(run_id: str) -> str:
    return f"{STARTS_PREFIX}{int(hashlib.sha256(run_id.encode()).hexdigest()[:8], 16) % SHARDS:02d}"


def _doc(start: PendingStart) -> dict[str, object]:
    return {"machine": start.machine, "ready": start.ready, "atMs": start.at_ms}


class DynamoStartOutbox:
    def __init__(self, host: HostStore) -> None:
        self._host = host

    def put_start(self, start: PendingStart, *, expires_at: int) -> None:
        self._host.put_item(_partition(start.run_id), start.run_id, _doc(start), expires_at=expires_at)

    def stage_start(self, start: PendingStart, *, expires_at: int) -> StagedWrite:
        return self._host.stage_put(_partition(start.run_id), start.run_id, _doc(start), expires_at=expires_at)

    def stage_clear(self, run_id: str) -> StagedWrite:
        return self._host.stage_delete(_partition(run_id), run_id)

    def clear_start(self, run_id: str) -> None:
        self._host.delete_item(_partition(run_id), run_id)

    def read_due(self, before_ms: int) -> list[PendingStart]:
        found = [
            PendingStart(run_id=sk, machine=str(doc["machine"]), ready=bool(doc["ready"]), at_ms=int(doc["atMs"]))
            for shard in range(SHARDS)
            for sk, doc in self._host.query(f"{STARTS_PREFIX}{shard:02d}", consistent=True)
        ]
        return sorted((p for p in found if p.at_ms < before_ms), key=lambda p: (p.at_ms, p.run_id))
