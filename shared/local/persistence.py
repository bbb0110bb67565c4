"""Local state that survives: the embedded AWS's data kept in a folder (``serve --data-dir``, default ``.openwop/``).

What is kept: everything the host stores in moto's DynamoDB tables, S3 buckets, Secrets Manager secrets and SQS
queues (the messages waiting or in flight), and the DynamoDB stream records a consumer had not finished. Lambda
functions, IAM, state machines and stream mappings are not data: ``LocalAws.bootstrap`` makes them again from the
manifest at every start. Step Functions executions are not kept either: the runs they were driving are (their log,
status and state), and ``shared.local.resume`` starts their state machine again after a restart, which resumes each
run where its log ends (the engine's design: a task re-reads the run and goes on from ``lastSeq``).

How (docs/decisions/0095-local-state.md has the evidence and the cost):

- **Journal.** A WSGI layer in front of moto's server appends every *mutating* request of those four services (the
  method, path, headers and body as moto received them) to the current journal segment, with one ``write`` of a
  length- and CRC-framed record, *before* the response leaves: a request that got any answer is on disk (in the
  OS's page cache: it survives ``kill -9``; a power loss may lose the last writes the OS had not flushed). Mutating
  requests (and snapshots) run one at a time under one lock, so the journal order is the order moto applied them.
  Reads are not journaled and not serialised, nor are requests moto refused (a 4xx changed nothing). Two requests
  are journaled by meaning instead of by bytes: an SQS delete names the message ids its receipt handles designated
  (receipt handles die with the process), and an SQS send keeps the message ids moto answered, so a replayed
  message gets its first id back. Secrets Manager requests are journaled sealed (``shared.local.sealing``).
- **Snapshots.** When the journal since the last snapshot passes ``snapshot_bytes``, the journal's snapshot thread
  forks: the child (a copy-on-write image of the parent at a moment when no mutating request was in flight) pickles
  moto's data containers to ``snapshot.pickle`` (written beside, fsynced, renamed: a snapshot is whole or absent)
  and exits; the host goes on serving, and deletes the journal segments the snapshot covers once the child
  succeeded. The secrets store is pickled and sealed by the host before the fork.
- **Deleted secrets.** A ``DeleteSecret`` is answered once a snapshot without the secret has replaced the segments
  that held it (an ``erased`` record makes a start after a crash take it): nothing of it stays in the folder.
- **Erasure.** Once the erasure hook has delivered a run's REMOVE, the run's queued messages are deleted (journaled by
  message id), its stream records are kept out of snapshots, and a snapshot is taken: the journal segments that
  wrote its data go with the ones it covers (decision 0127).
- **Start.** Load the snapshot (if any) into moto's backends, replay the later segments in order through moto's
  own WSGI application (in process, no sockets), then go on appending to a new segment. A torn last record (the
  process died inside its ``write``; that request got no answer) is dropped; a damaged record anywhere else stops
  the start with an error, never an empty host.
- **Stream records.** Replaying a DynamoDB write makes its stream record again; the records of a consumer are
  delivered again after a restart unless the journal shows the consumer went idle after them (a marker record
  appended whenever a consumer's worker drains its queue). Consumers are idempotent (fan-out: FIFO dedup ids;
  erasure), so a crash costs at most a few repeated webhook deliveries, never a lost one.

The folder: ``FORMAT`` (JSON: format number, the host and moto versions that wrote it), ``lock`` (``flock``ed by
the running host: a second host on the folder refuses to start), ``snapshot.pickle``, ``journal-<n>.log``,
``secrets.key`` (``shared.local.sealing``). Another format or another moto version is refused with both versions
named (moto's pickled classes are the snapshot's format), never read as empty.

This module is the journal (``Journal``: the WSGI layer, recovery, the snapshot child). Beside it:
``shared.local.datadir`` (the folder, its format and lock), ``shared.local.journal_records`` (which requests are
journaled, a record's framing), ``shared.local.snapshots`` (the pickled containers) and ``shared.local.moto_data``
(which containers are kept, and the edits a replay makes to them).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import io
import json
import logging
import os
import pickle
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from shared.local.datadir import FORMAT, DataDir, host_version, moto_version
from shared.local.journal_records import classify, frame, read_segment
from shared.local.moto_data import (
    clear_stream_backlog,
    collect_state,
    install_state,
    sqs_delete_ids,
    sqs_ids_for_handles,
    sqs_messages_naming,
    sqs_restore_ids,
    sqs_sent_ids,
)
from shared.local.sealing import SEALED_SERVICE, Sealer, open_state, seal_state
from shared.local.snapshots import (  # a snapshot names the two rebuilders here (snapshots.PICKLED_IN)
    _rebuild_key_store,  # noqa: F401
    _rebuild_limited_dict,  # noqa: F401
    dispatch_table,
    read_snapshot,
    write_snapshot,
)

log = logging.getLogger("shared.local.persistence")

SNAPSHOT_TIMEOUT_S = 900.0
"""A snapshot child still running after this is killed (the journal keeps everything; another is tried later)."""
DEFAULT_SNAPSHOT_BYTES = 16 * 1024 * 1024
"""Journal bytes after which a snapshot is taken (``OPENWOP_SNAPSHOT_JOURNAL_MB`` overrides): the most a start
replays after a crash."""

_KEPT_ENVIRON = (
    "REQUEST_METHOD",
    "SCRIPT_NAME",
    "PATH_INFO",
    "QUERY_STRING",
    "REQUEST_URI",
    "RAW_URI",
    "CONTENT_TYPE",
    "CONTENT_LENGTH",
    "SERVER_NAME",
    "SERVER_PORT",
    "SERVER_PROTOCOL",
    "wsgi.url_scheme",
)


def snapshot_bytes_setting() -> int:
    raw = os.environ.get("OPENWOP_SNAPSHOT_JOURNAL_MB")
    return int(float(raw) * 1024 * 1024) if raw else DEFAULT_SNAPSHOT_BYTES


@dataclass
class Recovery:
    """What a start found and did."""

    snapshot_bytes: int = 0
    records: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    """CPU of the whole process while it loaded (nothing else runs then)."""
    stream_batches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    compact: bool = False
    """The replayed journal holds an erasure no snapshot covered yet: take one once the host runs."""


class Journal:
    """The WSGI application the moto server runs when state is kept: ``app`` (moto's) behind the journal."""

    def __init__(
        self,
        data_dir: DataDir,
        app: Any,
        *,
        sealer: Sealer | None = None,
        snapshot_bytes: int | None = None,
        pending_streams: Callable[[], list[tuple[str, dict[str, Any]]]] = list,
    ) -> None:
        self.data_dir = data_dir
        self.app = app
        self.sealer = sealer or Sealer.for_folder(data_dir)
        self.lock = threading.Lock()
        self.snapshot_bytes = snapshot_bytes if snapshot_bytes is not None else snapshot_bytes_setting()
        self.pending_streams = pending_streams
        self.since_snapshot = 0
        self.closed = False
        self.snapshots = 0
        """Snapshots this process wrote (children that succeeded)."""
        self.last_pause_ms = 0.0
        """How long the last background snapshot held mutating requests (capture and fork)."""
        self._fd = -1
        self._segment = 0
        self._child: int | None = None
        self._wanted = threading.Event()
        self._busy = False
        self._snapshotter: threading.Thread | None = None
        self.compact_pending = False
        self._erased: set[str] = set()
        """Run ids erased while this process ran: their stream records are left out of every snapshot."""

    # -- recovery -------------------------------------------------------------------------------------------------

    def recover(self) -> Recovery:
        """Load the snapshot and replay the later segments into moto (nothing else may run yet); then open a new
        segment for this process. Returns what was found (the stream batches to deliver again included)."""
        started, used = time.perf_counter(), time.process_time()
        report = Recovery()
        self.data_dir.remove_stale()
        loaded = read_snapshot(self.data_dir.snapshot)
        through = 0
        pending: dict[str, list[dict[str, Any]]] = {}
        if loaded is not None:
            header, state = loaded
            install_state(open_state(state, self.sealer))
            through = int(header["through"])
            for name, event in header.get("streams", []):
                pending.setdefault(name, []).append(event)
            report.snapshot_bytes = self.data_dir.snapshot.stat().st_size
        segments = self.data_dir.segments()
        for number in [n for n in segments if n <= through]:
            self.data_dir.segment(number).unlink()  # covered by the snapshot: a compaction that ended before the rm
        later = [n for n in segments if n > through]
        gc_was = gc.isenabled()
        gc.disable()
        try:
            for number in later:
                path = self.data_dir.segment(number)
                self.since_snapshot += path.stat().st_size
                for record in read_segment(path, last=number == later[-1]):
                    self._replay(record, pending)
                    report.records += 1
        finally:
            if gc_was:
                gc.enable()
        gc.freeze()  # what was loaded lives as long as the process: keep the collector (and forks) off it
        report.stream_batches = [(name, event) for name, events in pending.items() for event in events]
        # a format-1 folder holds secrets in clear: one snapshot seals them and drops the journal that held them
        report.compact = self.compact_pending or self.data_dir.written_format < FORMAT
        self.sealer.keep()  # a new folder's key (the journal held nothing sealed): on disk before its first use
        self._segment = max([through, *segments]) + 1  # never a number a snapshot already covers
        self._open_segment()
        report.seconds = time.perf_counter() - started
        report.cpu_seconds = time.process_time() - used
        return report

    def _replay(self, record: tuple[Any, ...], pending: dict[str, list[dict[str, Any]]]) -> None:
        kind = record[0]
        if kind == "idle":  # the consumer had delivered everything before this point
            _, consumer, table = record
            pending.pop(consumer, None)
            clear_stream_backlog(table)
            return
        if kind == "erased":  # an erasure asked for a snapshot: the journal before it may hold the run's data
            self.compact_pending = True
            return
        if kind == "sqs-delete":
            _, queue_url, ids = record
            sqs_delete_ids(queue_url, ids)
            return
        kind, saved, body, extra = record
        if kind == "sealed":
            body = self.sealer.open(body)
        _, response = _call(self.app, {**saved, **wsgi_keys(body)})
        if extra and extra.get("sent"):
            answered = sqs_sent_ids(extra["operation"], response)
            sqs_restore_ids(extra["queue"], answered, extra["sent"])

    # -- the WSGI layer ---------------------------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        mutation = classify(environ)
        if mutation is None:
            return self.app(environ, start_response)  # type: ignore[no-any-return]
        body = _read_body(environ)
        saved = {k: environ[k] for k in _KEPT_ENVIRON if k in environ}
        saved.update({k: v for k, v in environ.items() if k.startswith("HTTP_") and k != "HTTP_TRANSFER_ENCODING"})
        with self.lock:
            if self.closed or self._fd < 0:  # stopping (or not started): nothing is applied that is not kept
                return _refuse(start_response)
            record: tuple[Any, ...] | None = None
            extra: dict[str, Any] | None = None
            if mutation.service == "sqs" and mutation.operation in ("DeleteMessage", "DeleteMessageBatch"):
                queue_url, ids = sqs_ids_for_handles(_json(body), mutation.operation == "DeleteMessageBatch")
                record = ("sqs-delete", queue_url, ids)
            status, response, headers = call_capturing(self.app, environ)
            if status.startswith("4"):  # refused (a failed condition, a bad request): it changed nothing
                start_response(status, headers)
                return [response]
            if record is None:
                if mutation.service == "sqs" and mutation.operation in ("SendMessage", "SendMessageBatch"):
                    extra = {
                        "operation": mutation.operation,
                        "queue": str(_json(body).get("QueueUrl", "")),
                        "sent": sqs_sent_ids(mutation.operation, response),
                    }
                sealed = mutation.service == SEALED_SERVICE
                record = ("sealed" if sealed else "http", saved, self.sealer.seal(body) if sealed else body, extra)
            self._append(pickle.dumps(record, protocol=5))
            deleted = mutation.service == SEALED_SERVICE and mutation.operation == "DeleteSecret"
            if deleted:  # a start after a crash before the snapshot below takes it
                self._append(pickle.dumps(("erased",), protocol=5))
            self._maybe_snapshot()
        if deleted:  # answered once the segments that held its sealed value are gone
            self.request_snapshot()
            self.wait_for_snapshot()
        start_response(status, headers)
        return [response]

    def erased(self, run_ids: Iterable[str]) -> None:
        """Runs whose erasure hook finished: nothing in the folder may keep their data. Their webhook messages leave
        every queue (journaled as deletes, so a replay drops them too), their stream records are kept out of
        snapshots, and a snapshot is taken, which removes the journal segments before it (they hold the requests
        that wrote the runs' data). An ``erased`` record makes a start after a crash take that snapshot instead."""
        ids = set(run_ids)
        if not ids:
            return
        with self.lock:
            if self.closed or self._fd < 0:
                return
            self._erased |= ids
            for queue_name, message_ids in sqs_messages_naming(ids).items():
                sqs_delete_ids(queue_name, message_ids)
                self._append(pickle.dumps(("sqs-delete", queue_name, message_ids), protocol=5))
            self._append(pickle.dumps(("erased",), protocol=5))
        self.request_snapshot()

    def snapshot_when_streams_idle(self, timeout: float = 60.0) -> None:
        """Take a snapshot once the stream consumers have delivered what a start handed them (on a thread)."""
        from shared.local.ddb_streams import wait_for_stream_idle

        def later() -> None:
            wait_for_stream_idle(timeout)
            self.request_snapshot()

        threading.Thread(target=later, name="openwop-erasure-snapshot", daemon=True).start()

    def _kept_streams(self) -> list[tuple[str, dict[str, Any]]]:
        """The undelivered stream batches a snapshot keeps: without the records of runs erased meanwhile."""
        erased = self._erased
        batches = self.pending_streams()
        if not erased:
            return batches
        kept = []
        for name, event in batches:
            records = [r for r in event["Records"] if not _names_any(r, erased)]
            if records:
                kept.append((name, {**event, "Records": records}))
        return kept

    def mark_idle(self, consumer: str, table: str, still_idle: Callable[[], bool]) -> None:
        """Journal that ``consumer`` delivered every stream record made so far (if it still has nothing queued
        once the lock is held: records are queued inside the writes that make them, under the same lock)."""
        with self.lock:
            if self.closed or self._fd < 0 or not still_idle():
                return
            self._append(pickle.dumps(("idle", consumer, table), protocol=5))

    def _append(self, payload: bytes) -> None:
        framed = frame(payload)
        view = memoryview(framed)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self.since_snapshot += len(framed)

    def _open_segment(self) -> None:
        self._fd = os.open(self.data_dir.segment(self._segment), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    # -- snapshots --------------------------------------------------------------------------------------------------

    def _maybe_snapshot(self) -> None:
        if self.since_snapshot >= self.snapshot_bytes and self._child is None:
            self.request_snapshot()

    def request_snapshot(self) -> None:
        """Ask the snapshot thread for a snapshot of the next instant no mutating request is in flight."""
        if self._snapshotter is None:
            self._snapshotter = threading.Thread(target=self._snapshots, name="openwop-snapshots", daemon=True)
            self._snapshotter.start()
        self._wanted.set()

    def _snapshots(self) -> None:
        """The one thread that forks snapshot children, for the journal's whole life: the child's parent-death
        signal follows the thread that forked it (``prctl(2)``), so a request thread, which ends with its request,
        must not fork."""
        while True:
            self._wanted.wait()
            self._busy = True
            self._wanted.clear()
            try:
                with self.lock:
                    if self.closed or self._fd < 0:
                        return
                    started = time.perf_counter()
                    pid, through = self._fork_snapshot()
                    self.last_pause_ms = (time.perf_counter() - started) * 1000
                self._reap(pid, through)
            finally:
                self._busy = False

    def _fork_snapshot(self) -> tuple[int, int]:
        """Fork a child that writes the snapshot of this instant (``self.lock`` held: no mutating request in
        flight); the journal goes on in a new segment. Returns the child's pid and the last segment it covers."""
        through = self._segment
        # Everything the child needs is made here: after a fork only the forking thread runs, and a lock another
        # thread held at that instant (an import lock, a logging handler's) would never be released in the child.
        dispatch = dispatch_table()
        header, state = self._header(through, self._kept_streams()), seal_state(collect_state(), self.sealer, dispatch)
        os.close(self._fd)
        self._segment += 1
        self._open_segment()
        self.since_snapshot = 0
        parent, prctl = os.getpid(), _prctl()
        pid = os.fork()
        if pid == 0:  # the child: one thread, a copy of the parent's memory at this instant
            code = 1
            try:
                _die_with_parent(parent, prctl)
                _close_sockets()
                write_snapshot(self.data_dir, header, state, dispatch)
                code = 0
            except BaseException as exc:  # noqa: BLE001 - reported by the parent's reaper; a line on stderr here
                os.write(2, f"openwop: the snapshot failed: {type(exc).__name__}: {exc}\n".encode())
            finally:
                os._exit(code)
        self._child = pid
        return pid, through

    def _reap(self, pid: int, through: int) -> None:
        deadline = time.monotonic() + SNAPSHOT_TIMEOUT_S
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:  # stuck (it never should be): the journal still holds everything
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        with self.lock:
            self._child = None
            if not ok:
                log.error(
                    "the snapshot child %d failed (status %d); the journal is kept and a snapshot is tried again later",
                    pid,
                    status,
                )
                self.since_snapshot += self.snapshot_bytes // 2  # retry later, not at the very next write
                return
            self.snapshots += 1
        for number in self.data_dir.segments():
            if number <= through:
                with contextlib.suppress(FileNotFoundError):
                    self.data_dir.segment(number).unlink()

    def wait_for_snapshot(self, timeout: float = 120.0) -> bool:
        """Wait until no snapshot is wanted or being written; False on timeout."""
        deadline = time.monotonic() + timeout
        while self._snapshotting() and time.monotonic() < deadline:
            time.sleep(0.02)
        return not self._snapshotting()

    def _snapshotting(self) -> bool:
        return self._busy or self._child is not None or (self._wanted.is_set() and not self.closed)

    def snapshot_now(self) -> int:
        """Write a snapshot in this process and drop the journal it covers (the bench, an operator's compaction).
        Blocks mutating requests while it writes. Returns the snapshot's size."""
        self.wait_for_snapshot()
        with self.lock:
            through = self._segment
            os.close(self._fd)
            self._segment += 1
            self._open_segment()
            state = seal_state(collect_state(), self.sealer, dispatch_table())
            size = write_snapshot(self.data_dir, self._header(through, self._kept_streams()), state)
            self.since_snapshot = 0
            self.snapshots += 1
        for number in self.data_dir.segments():
            if number <= through:
                self.data_dir.segment(number).unlink()
        return size

    def _header(self, through: int, streams: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "host": host_version(),
            "moto": moto_version(),
            "through": through,
            "streams": streams,
        }

    def close(self) -> None:
        """Refuse further mutating requests (503, not applied) and close the segment. A snapshot being written may
        finish (up to a minute; its journal is kept if it does not). The folder stays locked until
        ``DataDir.close``."""
        if not self.wait_for_snapshot(timeout=60.0) and self._child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._child, signal.SIGKILL)
            self.wait_for_snapshot(timeout=10.0)
        with self.lock:
            self.closed = True
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
        self._wanted.set()  # the snapshot thread sees closed and ends


def _names_any(record: dict[str, Any], run_ids: set[str]) -> bool:
    """A stream record whose keys name one of ``run_ids`` (a run item's ``pk``, an event's ``runId``, ...)."""
    keys = (record.get("dynamodb") or {}).get("Keys") or {}
    return any(value.get("S") in run_ids for value in keys.values() if isinstance(value, dict))


def _close_sockets() -> None:
    """In the snapshot child: close the sockets inherited from the host (its listeners, its clients' connections),
    so a connection the host closes is closed for its client at once, not when the child exits."""
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError, ValueError):
                fd = int(name)
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    os.close(fd)


def _prctl() -> Any:
    """libc's ``prctl``, looked up in the parent (``dlopen`` in a forked child could wait on a loader lock that
    another thread of the parent held at the fork); ``None`` where there is none."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _die_with_parent(parent: int, prctl: Any) -> None:
    """The snapshot child must not outlive its host (it would hold the folder's lock and could rename a snapshot
    under a new host): SIGKILL on the parent's death (Linux), and exit if the parent is already gone."""
    if prctl is not None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


def _read_body(environ: dict[str, Any]) -> bytes:
    from werkzeug.wsgi import get_input_stream

    body = get_input_stream(environ, max_content_length=None).read()
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    environ.pop("wsgi.input_terminated", None)
    environ.pop("HTTP_TRANSFER_ENCODING", None)
    return bytes(body)


def _json(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def wsgi_keys(body: bytes) -> dict[str, Any]:
    """The WSGI server's own keys of an environment whose request body is ``body`` (a journaled request answered
    again, or a request of this process answered without the socket: ``shared.local.direct``)."""
    return {
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": io.StringIO(),
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }


def call_capturing(app: Any, environ: dict[str, Any]) -> tuple[str, bytes, list[tuple[str, str]]]:
    got: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        got[:] = [status, headers]
        return lambda _data: None

    result = app(environ, start_response)
    try:
        body = b"".join(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    return got[0], body, got[1]


def _call(app: Any, environ: dict[str, Any]) -> tuple[str, bytes]:
    status, body, _ = call_capturing(app, environ)
    return status, body


def _refuse(start_response: Any) -> list[bytes]:
    body = json.dumps({"__type": "ServiceUnavailable", "message": "the local host is stopping"}).encode()
    start_response(
        "503 Service Unavailable", [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(body)))]
    )
    return [body]
