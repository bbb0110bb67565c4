"""Runs, their event logs and their tool calls: the records, the stores and the limits callers plan by."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# A run takes new events, and may perform effects, only while its status is one of these.
WRITABLE = ("pending", "running")
# Limits of the stores that their callers plan by (the storage implements them, services batch by them):
# ``RunStore.put_aux_many`` writes this many items (each with its run's tombstone check) to a transaction,
AUX_PER_TRANSACTION = 50
# and a page of a run's stored log holds at most this many events (a longer log is read by Query).
EVENTS_PER_PAGE = 99
# The run item's field an Advance task's last write names it by (``kernel.task_stamp``): the next task of the same
# execution keeps an eventually consistent read that carries it (``RunStore.get_run``'s ``written_by``; decision 0173).
TASK_STAMP = "taskStamp"


@dataclass
class RunRecord:
    """The stored run item. ``data`` holds the immutable creation facts; the rest mutate."""

    run_id: str
    tenant: str
    status: str
    last_seq: int
    created_at: str
    data: dict[str, Any]
    state: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    started_at: str | None = None
    completed_at: str | None = None
    execution_arn: str | None = None
    expires_at: int = 0
    summary: dict[str, Any] | None = None
    # Where a run that works in pages goes on (an eval fork: its next task, draft position, divergence), written
    # with the page's last append so it moves exactly when the page's events are stored.
    cursor: dict[str, Any] | None = None
    # The run item's ordinal counters (``claim_counter``, ``claim_ordinal``) as read: the next ordinal of each.
    counters: dict[str, int] = field(default_factory=dict)
    # The Advance task the run item names as its last writer (``TASK_STAMP``); at creation, the one before the first
    # task of its first execution, so that task may keep an eventually consistent read of it (decision 0173).
    task_stamp: str | None = None

    @property
    def kind(self) -> str:
        return str(self.data.get("kind", "workflow"))

    @property
    def terminal(self) -> bool:
        return self.status in ("completed", "failed", "cancelled")


@dataclass
class ListPage:
    runs: list[RunRecord]
    next_key: dict[str, Any] | None


@dataclass(frozen=True)
class StagedWrite:
    """An item one store prepared for another store's transaction (``EventStore.append_events``'s ``staged``):
    opaque to its callers, written all or nothing with what that transaction writes, once (its own condition)."""

    action: Any  # the store's transaction action
    size: int  # its bytes, as the transaction's size limit counts them


class RunStore(Protocol):
    def create_run(
        self, record: RunRecord, *, parent: str | None = None, fresh: bool = False, staged: Sequence[StagedWrite] = ()
    ) -> None:
        """The run's items in one transaction (``staged``: another store's writes in it, all or nothing)."""
        ...

    def get_run(
        self,
        run_id: str,
        *,
        consistent: bool = True,
        include_expired: bool = False,
        settled: bool = False,
        written_by: str | None = None,
    ) -> RunRecord | None: ...
    def get_runs(
        self, run_ids: Sequence[str], *, include_expired: bool = False, state: bool = True, tails: bool = True
    ) -> dict[str, RunRecord]: ...
    def list_runs(
        self,
        tenant: str,
        limit: int,
        start_key: dict[str, Any] | None,
        filters: dict[str, str],
        *,
        created_between: tuple[str, str] | None = None,
        evals: bool = False,
    ) -> ListPage: ...
    def list_run_ids(
        self,
        tenant: str,
        limit: int,
        start_key: dict[str, Any] | None,
        filters: dict[str, str],
        *,
        created_between: tuple[str, str] | None = None,
        evals: bool = False,
    ) -> tuple[list[str], dict[str, Any] | None]: ...
    def set_execution(self, run_id: str, execution_arn: str) -> bool:
        """Store the run's execution (what a cancel or an erasure stops); False, and nothing written, when the run is
        gone, being cancelled or ended: a cancel or an erasure may have read the execution before this one, and the
        caller stops this one itself (``chain.store_execution``)."""
        ...

    def get_status(self, run_id: str, *, consistent: bool = True) -> str | None: ...
    def update_status(self, run_id: str, status: str, *, allowed_from: Sequence[str]) -> bool: ...
    def claim_counter(self, run_id: str, counter: str, *, require_status: Sequence[str]) -> int:
        """The next 0-based ordinal of the run item's ``counter``, claimed atomically while the run's status is one
        of ``require_status`` (``ConflictError`` otherwise)."""
        ...

    def claim_aux_counter(self, run_id: str, sk: str, counter: str) -> int:
        """``ADD`` 1 to ``counter`` on the run's aux item ``sk`` (made by the first claim): the claimed 0-based
        ordinal. For ordinals of a part of a run (an eval trial's calls) that the run item should not carry."""
        ...

    def claim_ordinal(
        self,
        run_id: str,
        counter: str,
        expected: int,
        *,
        require_status: Sequence[str],
        effect: tuple[str, dict[str, Any], int] | None = None,
    ) -> None:
        """Claim ordinal ``expected`` of the run item's ``counter`` (it moves to ``expected + 1``) while the run's
        status is one of ``require_status`` and, with ``effect`` = (effect key, value, expiresAt), the intent of that
        outside effect (``claim_effect``'s item) in the same write. ``OrdinalTakenError`` (its ``current``: the next
        ordinal) when the counter was not at ``expected`` or another transaction on the run item was in flight (read
        again and retry); ``ConflictError`` when the run is not in such a status
        (or the effect was claimed before): nothing is written either way."""
        ...

    def put_aux(self, run_id: str, sk: str, value: dict[str, Any], expires_at: int) -> None: ...
    def stage_aux(self, run_id: str, sk: str, value: dict[str, Any], expires_at: int) -> StagedWrite:
        """``put_aux``'s item, for an append to write (``EventStore.append_events``): written once per key."""
        ...

    def put_aux_many(self, entries: Sequence[tuple[str, str, dict[str, Any], int]]) -> set[str]:
        """``put_aux`` for many (runId, sk, value, expiresAt), batched; returns the runs whose tombstone refused
        their items (nothing of theirs is written)."""
        ...

    def get_facts(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The creation facts (``RunRecord.data``) of many runs, eventually consistent where that shows them; runs
        absent or being erased are left out."""
        ...

    def live_in_image(self, image: dict[str, Any] | None) -> bool:
        """Whether a run item's stream image (a REMOVE record's OldImage) shows a run that had not ended."""
        ...

    def tombstoned(self, run_ids: Sequence[str]) -> set[str]: ...
    def get_definitions(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]: ...
    def claim_effect(
        self, run_id: str, effect_key: str, value: dict[str, Any], expires_at: int, *, stale_before: str | None = None
    ) -> bool: ...
    def get_aux(self, run_id: str, sk: str, *, settled: bool = False) -> dict[str, Any] | None: ...
    def get_definition(self, run_id: str) -> dict[str, Any] | None: ...
    def query_aux(
        self, run_id: str, prefix: str, *, between: tuple[str, str] | None = None
    ) -> list[tuple[str, dict[str, Any]]]: ...
    def is_tombstoned(self, run_id: str) -> bool: ...
    def set_progress(self, run_id: str, expected_last_seq: int, new_last_seq: int, updates: dict[str, Any]) -> None: ...
    def write_tombstone(self, run_id: str, tenant: str, at: str, expires_at: int) -> None: ...
    def delete_run_item(self, run_id: str) -> str | None:
        """Delete the run item; the execution ARN it stored ('' when none), None when there was none."""
        ...

    def delete_aux_all(self, run_id: str) -> int: ...
    def delete_tombstone(self, run_id: str) -> None: ...
    # restores only (a scan of the whole table): every run id with a run item; tombstones copied in from another table
    def run_ids(self) -> Iterator[str]: ...
    def copy_tombstones(self, source_table: str) -> int: ...


class EventStore(Protocol):
    def append_events(
        self,
        run_id: str,
        expected_next_seq: int,
        events: Sequence[dict[str, Any]],
        *,
        run_updates: dict[str, Any] | None = None,
        require_status: Sequence[str] | None = None,
        expires_at: int = 0,
        staged: Sequence[StagedWrite] = (),
        claim: tuple[str, int] | None = None,
        plain: bool = False,
        open_tail: bool | None = None,
    ) -> int:
        """Append ``events`` from ``expected_next_seq`` (``ConflictError`` when another writer took a position, the
        log's head or the run's status moved). ``open_tail`` True: this append opens the log's tail, so the writer's
        next appends may go ``plain`` (no head, no run updates) until one of its transactions closes it (any that
        writes pages, or ``open_tail`` False). ``staged`` items are written in the transaction that moves the head
        (all or nothing with it); with ``claim`` = (counter, expected) that transaction also claims ordinal
        ``expected`` of the run item's counter
        (``RunStore.claim_ordinal``; ``ConflictError`` when it is not at ``expected``)."""
        ...

    def read_events(
        self, run_id: str, after_seq: int = -1, *, limit: int | None = None, settled: bool = False
    ) -> list[dict[str, Any]]: ...
    def read_logs(self, last_seqs: Mapping[str, int]) -> dict[str, list[dict[str, Any]]]: ...
    def iter_events(
        self,
        run_id: str,
        after_seq: int = -1,
        upto_seq: int | None = None,
        *,
        limit: int | None = None,
        settled: bool = False,
    ) -> Iterator[list[dict[str, Any]]]: ...
    def copy_events(self, run_id: str, events: Sequence[dict[str, Any]], expires_at: int) -> int: ...
    def seed_log(
        self, run_id: str, events: Sequence[dict[str, Any]], expires_at: int, owner: dict[str, Any]
    ) -> int: ...
    def read_page(
        self, run_id: str, after_seq: int, limit: int | None = None, *, settled: bool = False
    ) -> list[dict[str, Any]]: ...
    def delete_all(self, run_id: str) -> int: ...
    def events_from_image(self, image: dict[str, Any]) -> list[tuple[int, dict[str, Any] | None]]:
        """The (sequence, event) pairs an item image of this store holds (a stream record's NewImage: a page of
        events or one); an event is None when it is stored out of line or in v1 vocabulary (read it with
        ``read_events``, which translates it)."""
        ...


@dataclass
class ToolCallRecord:
    run_id: str
    call_key: str
    agent_id: str
    invocation_id: str
    delegate: bool
    tool_name: str
    call_id: str
    args: Any
    status: str  # ok | error | forbidden | rate_limited
    result: Any = None
    error: dict[str, Any] | None = None
    source: str = "live"  # live | fixture | recorded
    started_at: str = ""
    duration_ms: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class ToolCallStore(Protocol):
    def put_call(self, record: ToolCallRecord, expires_at: int) -> bool: ...
    def stage_call(self, record: ToolCallRecord, expires_at: int) -> StagedWrite:
        """``put_call``'s write, for an append to write (``EventStore.append_events``): once per call key."""
        ...

    def put_calls(
        self,
        run_id: str,
        records: list[ToolCallRecord],
        expires_at: int,
        aux: Sequence[tuple[str, dict[str, Any]]] = (),
    ) -> None: ...
    def put_counted_call(
        self, record: ToolCallRecord, expires_at: int, counter: tuple[str, str], expected: int
    ) -> tuple[str, int | None]: ...
    def get_call(self, run_id: str, call_key: str) -> ToolCallRecord | None: ...
    def list_calls(
        self, run_id: str, *, between: tuple[str, str] | None = None, named: Collection[str] | None = None
    ) -> list[ToolCallRecord]:
        """The run's records by call key (``between``: keys in that range); ``named``: the call ids its settled log
        names, so the read may be eventually consistent (again consistent when one is not shown)."""
        ...

    def get_calls(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], ToolCallRecord]: ...
    def delete_all(self, run_id: str) -> int: ...
