"""The conformance counter tool's counters and the side-effect ledger: host items the engine and services read."""

from __future__ import annotations

from typing import Any, Protocol


class CounterRepository(Protocol):
    """The counter tool's counters, by tenant and name. An increment is written with its call's record
    (``ToolCallStore.put_counted_call``), which takes the counter's reference from ``get_ref``."""

    def get_count(self, tenant: str, name: str) -> int:
        """The counter's value (0 when it was never incremented); a strongly consistent read."""
        ...

    def get_ref(self, tenant: str, name: str) -> tuple[str, str]:
        """The counter's item reference for ``ToolCallStore.put_counted_call`` (a pure function of its names)."""
        ...


class EffectLedger(Protocol):
    """The side-effect nodes' ledger rows of a run, by tenant."""

    def put_effect(
        self, tenant: str, run_id: str, node_id: str, ordinal: int, row: dict[str, Any], *, expires_at: int
    ) -> bool:
        """Write the ``ordinal``-th effect of the node once, only while the run is writable: True when written now,
        False when it was written before (a retried step); ``ConflictError`` when the run is cancelled, finished or
        erased (the effect is not performed). The row expires with the run (``expires_at``)."""
        ...

    def list_effects(self, tenant: str, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        """The run's (effectId as the API shows it, ledger row)."""
        ...

    def delete_effects(self, tenant: str, run_id: str) -> int:
        """Delete every ledger row of the run (its erasure); how many there were."""
        ...
