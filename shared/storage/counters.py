"""Counters and the effect ledger on the host table: ``COUNTER#<tenant>`` / ``<name>`` (attribute ``count``) and
``LEDGER#<tenant>`` / ``<runId>#<nodeId>#<ordinal>`` (a ledger row's effectId is ``LEDGER#`` and its sort key)."""

from __future__ import annotations

from typing import Any

from shared.ports import HostStore
from shared.storage.schema import COUNTER_PK_PREFIX, LEDGER_PK_PREFIX


class DynamoCounterRepository:
    def __init__(self, host: HostStore) -> None:
        self._host = host

    def get_count(self, tenant: str, name: str) -> int:
        return self._host.counter_read(*self.get_ref(tenant, name))

    def get_ref(self, tenant: str, name: str) -> tuple[str, str]:
        return f"{COUNTER_PK_PREFIX}{tenant}", name


class DynamoEffectLedger:
    def __init__(self, host: HostStore) -> None:
        self._host = host

    def put_effect(
        self, tenant: str, run_id: str, node_id: str, ordinal: int, row: dict[str, Any], *, expires_at: int
    ) -> bool:
        sk = f"{run_id}#{node_id}#{ordinal:06d}"
        return self._host.put_effect(f"{LEDGER_PK_PREFIX}{tenant}", sk, row, run_id=run_id, expires_at=expires_at)

    def list_effects(self, tenant: str, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        return [
            (f"{LEDGER_PK_PREFIX}{sk}", row)
            for sk, row in self._host.query(f"{LEDGER_PK_PREFIX}{tenant}", f"{run_id}#")
        ]

    def delete_effects(self, tenant: str, run_id: str) -> int:
        return self._host.delete_prefix(f"{LEDGER_PK_PREFIX}{tenant}", f"{run_id}#")
