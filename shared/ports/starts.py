"""The start outbox: a marker per run being created, from its first write until its execution is started."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from shared.ports.runs import StagedWrite


@dataclass(frozen=True)
class PendingStart:
    """A run written (or being written) whose execution is not known to be started.

    ``ready``: everything its execution needs is stored (a workflow run: from its first write; an eval run or an eval
    fork: once its plan is; a session: once its first events are), so a sweep may start it; not ready, a sweep fails
    it. ``at_ms``: when its create began (epoch ms)."""

    run_id: str
    machine: str
    ready: bool
    at_ms: int


class StartOutbox(Protocol):
    def put_start(self, start: PendingStart, *, expires_at: int) -> None:
        """Write (or rewrite) the run's marker; it expires with the run (``expires_at``, epoch seconds)."""
        ...

    def stage_start(self, start: PendingStart, *, expires_at: int) -> StagedWrite:
        """``put_start``'s write, for the transaction that creates the run (decision 0186)."""
        ...

    def stage_clear(self, run_id: str) -> StagedWrite:
        """``clear_start``'s write, for the append that opens the run's own log (decision 0186)."""
        ...

    def clear_start(self, run_id: str) -> None:
        """Delete the run's marker (absent: a no-op)."""
        ...

    def read_due(self, before_ms: int) -> list[PendingStart]:
        """The markers whose create began before ``before_ms``, oldest first. Reads only markers, never runs."""
        ...
