"""DynamoDB Streams → Lambda in the embedded AWS (patch 2 in ``shared.local.patches``): stream records delivered
to the real handlers on one ordered background worker per consuming function, only the event names its deployed
mapping's filter keeps (``manifest.STREAM_EVENT_NAMES``), and TTL deletions' REMOVE records marked with the TTL
service identity (``shared.local.ttl``)."""

from __future__ import annotations

import base64
import datetime
import json
import logging
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from shared.local.context import function_name_from
from shared.local.lambda_registry import LocalHandlerNotFoundError, Target, invoke_target, resolve_target
from shared.manifest.compute import STREAM_BATCH_SIZE  # records per invocation, as the deployed mappings

TTL_IDENTITY: dict[str, str] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}

log = logging.getLogger("shared.local")


@dataclass
class StreamDeliveryError:
    function: str
    error: dict[str, Any]
    event: dict[str, Any]


_stream_errors: list[StreamDeliveryError] = []
LOCAL_WINDOW_ENV = "LOCAL_STREAM_BATCHING_WINDOW_SECONDS"
LOCAL_WINDOW_S = 1.0
"""The local batching window of a consumer whose deployed mapping has one (``manifest.STREAM_BATCHING_WINDOW_S``):
shorter than the deployed one by default, so tests wait less for a delivery; ``LOCAL_WINDOW_ENV`` sets it (the bench
sets the deployed value)."""


STREAM_LANES = 4
"""Batches of different partition keys a consumer is handed at once. On AWS a table's stream has a shard per
partition (more under load) and the mapping reads the shards concurrently, each in order; the local table has one
shard, so its records are split by partition key instead: each key's records in order, in one lane."""


@dataclass
class _Lane:
    queue: deque[tuple[Target, dict[str, Any]]] = field(default_factory=deque)
    since: float = 0.0  # when the oldest queued record arrived (monotonic): its batching window runs from then
    current: tuple[str, dict[str, Any]] | None = None  # the batch being delivered
    busy: bool = False
    thread: threading.Thread | None = None


def _lane_of(record: dict[str, Any], lanes: int) -> int:
    return zlib.crc32(_partition_of(record).encode()) % lanes


def _partition_of(record: dict[str, Any]) -> str:
    """A stream record's partition key value (its DynamoDB JSON, as text)."""
    keys = record["dynamodb"].get("Keys") or {}
    partition: Any = next(iter(keys.values()), {})  # moto names the hash key first
    return json.dumps(partition, sort_keys=True)


@dataclass
class _StreamWorker:
    """The event source mapping of one consuming function: its stream records split by partition key into
    ``lanes``, each lane delivering its batches in order on its own thread, like a mapping reading a shard per
    partition: batches queued while the handler ran are coalesced into one invocation of up to
    ``STREAM_BATCH_SIZE`` records (as the AWS poller batches a shard's backlog). With a batching window
    (``window_s``), a lane's first waiting record waits for more until the window has passed since it arrived or
    the batch is full, as a mapping's ``MaximumBatchingWindowInSeconds``."""

    name: str
    attempts: int = 3
    lanes: int = STREAM_LANES
    window_s: float = 0.0
    waits: list[float] = field(default_factory=list)  # per batch: seconds the window held it once it could go
    partitions: list[frozenset[str]] = field(default_factory=list)  # per invocation: its records' partition keys
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _lanes: list[_Lane] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)  # eventIDs already queued: moto may hand a record over twice
    _seen_order: deque[str] = field(default_factory=deque)
    _delivered: bool = False  # a batch was delivered since the worker last went idle
    _removed: list[dict[str, Any]] = field(default_factory=list)  # Keys of REMOVE records delivered since then

    def __post_init__(self) -> None:
        self._lanes = [_Lane() for _ in range(max(1, self.lanes))]

    def submit(self, target: Target, event: dict[str, Any]) -> None:
        with self._cond:
            fresh = [r for r in event["Records"] if r["eventID"] not in self._seen]
            if not fresh:
                return
            for record in fresh:
                self._seen.add(record["eventID"])
                self._seen_order.append(record["eventID"])
            while len(self._seen_order) > 10_000:
                self._seen.discard(self._seen_order.popleft())
            by_lane: dict[int, list[dict[str, Any]]] = {}
            for record in fresh:
                by_lane.setdefault(_lane_of(record, len(self._lanes)), []).append(record)
            for i, records in by_lane.items():
                lane = self._lanes[i]
                if not lane.queue:
                    lane.since = time.monotonic()
                lane.queue.append((target, {"Records": records}))
                if lane.thread is None or not lane.thread.is_alive():
                    lane.thread = threading.Thread(
                        target=self._run, args=(lane,), daemon=True, name=f"openwop-ddb-stream-{self.name}-{i}"
                    )
                    lane.thread.start()
            self._cond.notify_all()

    def _idle(self) -> bool:
        return all(not lane.queue and not lane.busy for lane in self._lanes)

    def _run(self, lane: _Lane) -> None:
        while True:
            with self._cond:
                taken = self._take(lane)
            if taken is None:  # all drained: say so once, outside the condition
                listener = _idle_listener
                if listener is not None:
                    listener(self)  # it takes the journal's lock, then asks idle(): never under the condition
                continue
            target, records = taken
            self._deliver(target, {"Records": records})
            with self._cond:
                lane.current = None
                self._delivered = True
                if _idle_listener is not None:  # someone takes them (the kept state's erasure follow-up)
                    self._removed.extend(r["dynamodb"].get("Keys", {}) for r in records if r["eventName"] == "REMOVE")

    def _take(self, lane: _Lane) -> tuple[Target, list[dict[str, Any]]] | None:
        """Under the condition: the lane's next batch once it may go, or ``None`` when the whole worker has just
        drained (to be announced). Only a lane that has just gone idle wakes the others (and ``wait_idle``): idle
        lanes that woke each other would never sleep."""
        while not lane.queue:
            if lane.busy:
                lane.busy = False
                self._cond.notify_all()
            if self._delivered and self._idle():
                self._delivered = False
                return None
            self._cond.wait()
        held = time.monotonic()
        self._fill(lane)
        if self.window_s > 0 and len(self.waits) < 100_000:
            self.waits.append(time.monotonic() - held)
        target, event = lane.queue.popleft()
        records = list(event["Records"])
        while lane.queue and len(records) + len(lane.queue[0][1]["Records"]) <= STREAM_BATCH_SIZE:
            records.extend(lane.queue.popleft()[1]["Records"])
        lane.since = time.monotonic()  # what is left waits a window of its own
        lane.busy = True
        lane.current = (target.name, {"Records": records})
        return target, records

    def _fill(self, lane: _Lane) -> None:
        """Under the condition: wait until the lane's batching window has passed since its oldest queued record
        arrived, or until it holds a full batch (no wait without a window)."""
        while self.window_s > 0 and sum(len(e["Records"]) for _, e in lane.queue) < STREAM_BATCH_SIZE:
            left = lane.since + self.window_s - time.monotonic()
            if left <= 0:
                return
            self._cond.wait(left)

    def pending(self) -> list[tuple[str, dict[str, Any]]]:
        """The batches not yet delivered, each lane's in order, the one being delivered first:
        ``[(function name, stream event)]``."""
        with self._cond:
            batches: list[tuple[str, dict[str, Any]]] = []
            for lane in self._lanes:
                batches += [lane.current] if lane.current is not None else []
                batches += [(target.name, event) for target, event in lane.queue]
            return batches

    def _deliver(self, target: Target, event: dict[str, Any]) -> None:
        """Invoke the handler with the batch; a raised error retries it whole, a reported item failure
        (``batchItemFailures``) retries it from the lowest sequence number reported, as the AWS mapping does."""
        for attempt in range(1, self.attempts + 1):
            with self._cond:
                if len(self.partitions) < 100_000:
                    self.partitions.append(frozenset(_partition_of(r) for r in event["Records"]))
            result, error = invoke_target(target, event)
            failed = {
                str(f.get("itemIdentifier"))
                for f in (result if isinstance(result, dict) else {}).get("batchItemFailures", [])
            }
            if error is None and failed:
                records = event["Records"]
                at = next((i for i, r in enumerate(records) if str(r["dynamodb"].get("SequenceNumber")) in failed), 0)
                event = {"Records": records[at:]}
                error = {"errorMessage": f"{len(failed)} batch item failures reported"}
            if error is None:
                return
            if attempt == self.attempts:
                log.error("stream batch for %s dropped after %d attempts: %s", target.name, attempt, error)
                _stream_errors.append(StreamDeliveryError(target.name, error, event))
            else:
                time.sleep(0.05 * attempt)

    def take_removed(self) -> list[dict[str, Any]]:
        """The keys (DynamoDB JSON) of the REMOVE records delivered since the last call, in order."""
        with self._cond:
            removed, self._removed = self._removed, []
            return removed

    def idle(self) -> bool:
        with self._cond:
            return self._idle()

    def wait_idle(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(self._idle, timeout=timeout)


_stream_workers: dict[str, _StreamWorker] = {}
_stream_workers_lock = threading.Lock()
_idle_listener: Callable[[_StreamWorker], None] | None = None


def on_stream_idle(listener: Callable[[_StreamWorker], None] | None) -> None:
    """Call ``listener(worker)`` each time a stream worker has delivered everything queued to it (the local
    state's journal marks it, so a restart does not deliver those records again); ``None`` removes it."""
    global _idle_listener
    _idle_listener = listener


def pending_stream_batches() -> list[tuple[str, dict[str, Any]]]:
    """Every stream batch queued or being delivered, by consuming function: what a snapshot keeps."""
    with _stream_workers_lock:
        workers = list(_stream_workers.values())
    return [batch for worker in workers for batch in worker.pending()]


def deliver_stream_batch(function_name: str, event: dict[str, Any]) -> None:
    """Queue a stream batch for its consuming function again (a batch a restart found undelivered)."""
    _stream_worker_for(function_name).submit(resolve_target(function_name), event)


def _stream_worker_for(name: str) -> _StreamWorker:
    with _stream_workers_lock:
        worker = _stream_workers.get(name)
        if worker is None:
            worker = _stream_workers[name] = _StreamWorker(name, window_s=_window_of(name))
        return worker


def _worker_named(function_name: str) -> _StreamWorker | None:
    from shared import manifest

    local = next((f.local_name for f in manifest.FUNCTIONS if f.name == function_name), function_name)
    with _stream_workers_lock:
        return _stream_workers.get(local)


def stream_batch_partitions(function_name: str) -> list[frozenset[str]]:
    """Per invocation of ``function_name`` so far (each attempt counted): the partition key values of its records,
    each as DynamoDB JSON text (``'{"S": "..."}'``), so a test can count the batches that held its own items."""
    worker = _worker_named(function_name)
    if worker is None:
        return []
    with worker._cond:
        return list(worker.partitions)


def stream_window_waits(function_name: str) -> list[float]:
    """Per batch delivered to ``function_name`` so far: the seconds the batching window held it after the lane was
    free to deliver it (what the window added to its records' delivery lag); empty without a window."""
    worker = _worker_named(function_name)
    if worker is None:
        return []
    with worker._cond:
        return list(worker.waits)


def stream_window_s(function_name: str) -> float:
    """The local batching window of ``function_name``'s mapping (0: none)."""
    from shared import manifest

    local = next((f.local_name for f in manifest.FUNCTIONS if f.name == function_name), function_name)
    return _window_of(local)


def _window_of(function_name: str) -> float:
    """The local batching window of a consuming function: none where its deployed mapping has none, else
    ``LOCAL_WINDOW_ENV`` (seconds) or ``LOCAL_WINDOW_S``."""
    import os

    from shared import manifest

    deployed = {manifest.function(fn).local_name: s for (_, fn), s in manifest.STREAM_BATCHING_WINDOW_S.items()}
    if not deployed.get(function_name):
        return 0.0
    return max(0.0, float(os.environ.get(LOCAL_WINDOW_ENV) or LOCAL_WINDOW_S))


def wait_for_stream_idle(timeout: float = 10.0) -> bool:
    """Block until every DynamoDB stream batch produced so far (and the batches its handlers caused) has been
    delivered, by every consuming function. Returns False on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        with _stream_workers_lock:
            workers = list(_stream_workers.values())
        for worker in workers:
            if not worker.wait_idle(max(0.0, deadline - time.monotonic())):
                return False
        with _stream_workers_lock:
            if all(w.idle() for w in _stream_workers.values()):
                return True
        if time.monotonic() > deadline:
            return False


def stream_delivery_errors() -> list[StreamDeliveryError]:
    """Batches whose handler kept failing (delivered ``attempts`` times, then dropped). Tests may assert it empty."""
    return list(_stream_errors)


_event_names: dict[str, str] | None = None


def _kept_event_name(function_name: str) -> str | None:
    """The one event name the deployed mapping of ``function_name`` keeps (its FilterCriteria), or None (keep all:
    a function the manifest does not map, such as a test's)."""
    global _event_names
    if _event_names is None:
        from shared import manifest

        _event_names = {manifest.function(fn).local_name: name for (_, fn), name in manifest.STREAM_EVENT_NAMES.items()}
    return _event_names.get(function_name)


def _wire(value: Any) -> Any:
    """A stream record value JSON cannot hold as it is: a binary attribute's bytes as base64 text (as AWS sends
    them; moto's item images carry the raw bytes), anything else as its text."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    return str(value)


def _epoch_seconds(value: Any) -> Any:
    from moto.core.utils import unix_time  # moto's datetimes are naive UTC

    return int(unix_time(value)) if isinstance(value, datetime.datetime) else value


def patch_stream_delivery() -> None:
    """DynamoDB Streams → Lambda event-source mapping. moto's ``send_dynamodb_items`` calls
    ``LambdaFunction.invoke``, which always takes the Docker path (even with ``use_docker: False``), fails and
    drops the records (research/tooling.md §1a). Deliver them instead as an AWS-shaped stream event to the real
    handler, asynchronously (as the AWS poller does) on one ordered worker; ``wait_for_stream_idle()`` lets tests
    wait. moto applies no FilterCriteria: a manifest consumer gets only the event name its deployed mapping keeps
    (the erasure hook no run item's MODIFY, the fan-out no event's REMOVE and the old image it carries); moto has
    no batching windows either."""
    from moto.awslambda.models import LambdaBackend

    def send_dynamodb_items(self: LambdaBackend, function_arn: str, items: list[Any], source: str) -> bytes:
        records = []
        kept = _kept_event_name(function_name_from(function_arn))
        for item in items:
            raw = item.to_json()
            if kept is not None and raw["eventName"] != kept:
                continue
            dynamodb = dict(raw["dynamodb"])
            dynamodb["ApproximateCreationDateTime"] = _epoch_seconds(dynamodb.get("ApproximateCreationDateTime"))
            record: dict[str, Any] = {
                "eventID": raw["eventID"],
                "eventName": raw["eventName"],
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": self.region_name,
                "dynamodb": json.loads(json.dumps(dynamodb, default=_wire)),
                "eventSourceARN": source,
            }
            if "userIdentity" in raw:
                record["userIdentity"] = dict(raw["userIdentity"])
            records.append(record)
        if not records:
            return b"filtered"  # truthy: nothing to deliver, and moto clears the shard's pending items
        try:
            target = resolve_target(function_arn)
        except LocalHandlerNotFoundError as exc:
            log.error("%s; %d stream records dropped", exc, len(records))
            _stream_errors.append(
                StreamDeliveryError(function_name_from(function_arn), {"errorMessage": str(exc)}, {"Records": records})
            )
            return b"dropped"
        _stream_worker_for(target.name).submit(target, {"Records": records})
        return b"queued"  # truthy: moto clears the shard's pending items, as its own ESM path does

    LambdaBackend.send_dynamodb_items = send_dynamodb_items  # type: ignore[method-assign]


_ttl_lock = threading.Lock()
_ttl_pending: set[tuple[str, str]] = set()


def _key_id(keys: dict[str, Any]) -> str:
    return json.dumps(keys, sort_keys=True, separators=(",", ":"))


@contextmanager
def ttl_deletion(table_name: str, keys: dict[str, Any]) -> Iterator[None]:
    """While active, the REMOVE stream record of this exact item (table + DynamoDB-JSON key) carries the TTL
    service identity, as real DynamoDB sets it on TTL expiry. Used by ``shared.local.ttl.ttl_sweep``."""
    entry = (table_name, _key_id(keys))
    with _ttl_lock:
        _ttl_pending.add(entry)
    try:
        yield
    finally:
        with _ttl_lock:
            _ttl_pending.discard(entry)


def patch_stream_record_identity() -> None:
    """TTL deletions. moto never expires items (no upstream sweeper), so ``ttl_sweep`` deletes them through the
    API; wrap ``StreamRecord.__init__`` so those deletions' REMOVE records carry
    ``userIdentity {type: Service, principalId: dynamodb.amazonaws.com}`` like AWS's TTL service."""
    from moto.dynamodb.models.table import StreamRecord

    original = StreamRecord.__init__

    def init(self: Any, table: Any, stream_type: str, event_name: str, old: Any, new: Any, seq: int) -> None:
        original(self, table, stream_type, event_name, old, new, seq)
        if event_name == "REMOVE" and _ttl_pending:
            entry = (table.name, _key_id(self.record["dynamodb"]["Keys"]))
            with _ttl_lock:
                marked = entry in _ttl_pending
            if marked:
                self.record["userIdentity"] = dict(TTL_IDENTITY)

    StreamRecord.__init__ = init  # type: ignore[method-assign]
