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
  Reads are not journaled and not serialised. Two requests are journaled by meaning instead of by bytes: an SQS
  delete names the message ids its receipt handles designated (receipt handles die with the process), and an SQS
  send keeps the message ids moto answered, so a replayed message gets its first id back.
- **Snapshots.** When the journal since the last snapshot passes ``snapshot_bytes``, the journal's snapshot thread
  forks: the child (a copy-on-write image of the parent at a moment when no mutating request was in flight) pickles
  moto's data containers to ``snapshot.pickle`` (written beside, fsynced, renamed: a snapshot is whole or absent)
  and exits; the host goes on serving, and deletes the journal segments the snapshot covers once the child
  succeeded.
- **Start.** Load the snapshot (if any) into moto's backends, replay the later segments in order through moto's
  own WSGI application (in process, no sockets), then go on appending to a new segment. A torn last record (the
  process died inside its ``write``; that request got no answer) is dropped; a damaged record anywhere else stops
  the start with an error, never an empty host.
- **Stream records.** Replaying a DynamoDB write makes its stream record again; the records of a consumer are
  delivered again after a restart unless the journal shows the consumer went idle after them (a marker record
  appended whenever a consumer's worker drains its queue). Consumers are idempotent (fan-out: FIFO dedup ids;
  erasure), so a crash costs at most a few repeated webhook deliveries, never a lost one.

The folder: ``FORMAT`` (JSON: format number, the host and moto versions that wrote it), ``lock`` (``flock``ed by
the running host: a second host on the folder refuses to start), ``snapshot.pickle``, ``journal-<n>.log``. Another
format or another moto version is refused with both versions named (moto's pickled classes are the snapshot's
format), never read as empty.
"""

from __future__ import annotations

import contextlib
import copyreg
import ctypes
import errno
import fcntl
import gc
import io
import json
import logging
import os
import pickle
import re
import signal
import stat
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.local.context import DEFAULT_ACCOUNT, DEFAULT_REGION

log = logging.getLogger("shared.local.persistence")

FORMAT = 1
"""The data folder's format. Change it (and teach ``DataDir.open`` to read or refuse the older one) whenever what a
snapshot or a journal record holds changes meaning."""

FORMAT_FILE = "FORMAT"
LOCK_FILE = "lock"
SNAPSHOT_FILE = "snapshot.pickle"
SEGMENT_RE = re.compile(r"^journal-(\d{8})\.log$")
SNAPSHOT_TIMEOUT_S = 900.0
"""A snapshot child still running after this is killed (the journal keeps everything; another is tried later)."""
DEFAULT_SNAPSHOT_BYTES = 16 * 1024 * 1024
"""Journal bytes after which a snapshot is taken (``OPENWOP_SNAPSHOT_JOURNAL_MB`` overrides): the most a start
replays after a crash."""

_HEADER = struct.Struct("<II")  # payload length, CRC-32 of the payload
_KEPT_SERVICES = ("dynamodb", "s3", "secretsmanager", "sqs")
_CREDENTIAL_SERVICE = re.compile(r"Credential=[^/,\s]+/\d{8}/[^/,\s]+/([^/,\s]+)/aws4_request")
_READ_PREFIXES = ("Get", "BatchGet", "Describe", "List", "Query", "Scan", "TransactGet", "Validate")
_SQS_WRITES = frozenset({"SendMessage", "SendMessageBatch", "DeleteMessage", "DeleteMessageBatch", "CreateQueue",
                         "DeleteQueue", "PurgeQueue", "SetQueueAttributes", "TagQueue", "UntagQueue",
                         "AddPermission", "RemovePermission"})
_KEPT_ENVIRON = ("REQUEST_METHOD", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING", "REQUEST_URI", "RAW_URI",
                 "CONTENT_TYPE", "CONTENT_LENGTH", "SERVER_NAME", "SERVER_PORT", "SERVER_PROTOCOL",
                 "wsgi.url_scheme")


class DataDirError(Exception):
    """The data folder cannot be used (in use, another format, damaged): one line for the operator."""


def host_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("openwop-serverless")
    except PackageNotFoundError:
        return "unknown"


def moto_version() -> str:
    import moto

    return str(moto.__version__)


def snapshot_bytes_setting() -> int:
    raw = os.environ.get("OPENWOP_SNAPSHOT_JOURNAL_MB")
    return int(float(raw) * 1024 * 1024) if raw else DEFAULT_SNAPSHOT_BYTES


# ---------------------------------------------------------------------------------------------------------------------
# The folder: format, lock, segments
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class DataDir:
    path: Path
    _lock_fd: int = -1

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> DataDir:
        """Take the folder for this host: create it (and its ``FORMAT``) if new, refuse it if another host holds it,
        if it is another format or moto version, or if it is not empty and not a data folder."""
        folder = Path(path).resolve()
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise DataDirError(f"data folder {folder} cannot be used: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise DataDirError(f"data folder {folder} is in use by another openwop-serverless host (pid {holder});"
                                   " stop it, or start this one with another --data-dir or --ephemeral") from exc
            raise DataDirError(f"data folder {folder} cannot be locked: {exc.strerror or exc}") from exc
        data_dir = cls(folder, fd)
        try:
            data_dir._check_format()
        except BaseException:
            data_dir.close()
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return data_dir

    def _check_format(self) -> None:
        fmt = self.path / FORMAT_FILE
        ours = {"format": FORMAT, "host": host_version(), "moto": moto_version()}
        if not fmt.exists():
            others = [p.name for p in self.path.iterdir() if p.name not in (LOCK_FILE,) and not p.name.startswith(".")]
            if others:
                raise DataDirError(f"{self.path} is not an openwop-serverless data folder (it has no {FORMAT_FILE} "
                                   f"file but holds {', '.join(sorted(others)[:3])}); choose an empty or new folder")
            _write_atomically(fmt, (json.dumps(ours, indent=1) + "\n").encode())
            return
        try:
            found = json.loads(fmt.read_text(encoding="utf-8"))
            found_format = int(found["format"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataDirError(f"{fmt} is unreadable; this host writes format {FORMAT} "
                               f"(openwop-serverless {ours['host']}); move the folder away to start empty") from exc
        found_host, found_moto = found.get("host", "unknown"), found.get("moto", "unknown")
        if found_format != FORMAT or found_moto != ours["moto"]:
            raise DataDirError(
                f"data folder {self.path} was written in format {found_format} by openwop-serverless {found_host} "
                f"(moto {found_moto}); this is openwop-serverless {ours['host']} (format {FORMAT}, moto "
                f"{ours['moto']}), which cannot read it: start the version that wrote it, or use another --data-dir "
                f"or --ephemeral (the folder was left as it is)")
        if found_host != ours["host"]:  # same format, same moto: readable; the file names the newest writer
            _write_atomically(fmt, (json.dumps(ours, indent=1) + "\n").encode())

    def close(self) -> None:
        if self._lock_fd >= 0:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = -1

    @property
    def snapshot(self) -> Path:
        return self.path / SNAPSHOT_FILE

    def segment(self, number: int) -> Path:
        return self.path / f"journal-{number:08d}.log"

    def segments(self) -> list[int]:
        return sorted(int(m.group(1)) for p in self.path.iterdir() if (m := SEGMENT_RE.match(p.name)))

    def remove_stale(self) -> None:
        """Leftovers of a snapshot that died half-written."""
        for p in self.path.glob(f"{SNAPSHOT_FILE}.*.tmp"):
            with contextlib.suppress(OSError):
                p.unlink()


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------------------------------
# Which requests change what is kept
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutation:
    service: str
    operation: str


def classify(environ: dict[str, Any]) -> Mutation | None:
    """The kept service and operation of a request that may change kept data; ``None`` for anything else (reads,
    other services, unsigned requests such as moto's own API)."""
    found = _CREDENTIAL_SERVICE.search(environ.get("HTTP_AUTHORIZATION", ""))
    if found is None or found.group(1) not in _KEPT_SERVICES:
        return None
    service = found.group(1)
    method = environ.get("REQUEST_METHOD", "GET")
    if service == "s3":
        return Mutation(service, method) if method in ("PUT", "POST", "DELETE") else None
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    operation = target.rpartition(".")[2] if target else ""
    if service == "sqs":
        if not operation:  # the query protocol: journaled whole, without the id bookkeeping of the JSON protocol
            return Mutation(service, "query") if method == "POST" else None
        return Mutation(service, operation) if operation in _SQS_WRITES else None
    if service == "dynamodb" and not target.startswith("DynamoDB_"):
        return None  # DynamoDB Streams reads
    if not operation or operation.startswith(_READ_PREFIXES):
        return None
    return Mutation(service, operation)


# ---------------------------------------------------------------------------------------------------------------------
# Snapshots: moto's data containers, pickled
# ---------------------------------------------------------------------------------------------------------------------


def _backends() -> dict[str, Any]:
    from moto.dynamodb.models import dynamodb_backends
    from moto.s3.models import s3_backends
    from moto.secretsmanager.models import secretsmanager_backends
    from moto.sqs.models import sqs_backends

    return {"dynamodb": dynamodb_backends[DEFAULT_ACCOUNT][DEFAULT_REGION],
            "s3": s3_backends[DEFAULT_ACCOUNT]["aws"],
            "secretsmanager": secretsmanager_backends[DEFAULT_ACCOUNT][DEFAULT_REGION],
            "sqs": sqs_backends[DEFAULT_ACCOUNT][DEFAULT_REGION]}


def dynamodb_table(name: str) -> Any:
    """moto's table object (this process's moto: the local host's own reads that the API makes slow)."""
    return _backends()["dynamodb"].tables[name]


def collect_state() -> dict[str, Any]:
    """References to the kept containers (pickled as they are at the moment of the call)."""
    b = _backends()
    return {"dynamodb": b["dynamodb"].tables, "s3": b["s3"].buckets,
            "secretsmanager": b["secretsmanager"].secrets, "sqs": b["sqs"].queues}


def install_state(state: dict[str, Any]) -> None:
    from moto.s3.models import s3_backends

    b = _backends()
    b["dynamodb"].tables = state["dynamodb"]
    b["s3"].buckets = state["s3"]
    for name, bucket in state["s3"].items():
        s3_backends.bucket_accounts[name] = (bucket.partition, DEFAULT_ACCOUNT)
    b["secretsmanager"].secrets = state["secretsmanager"]
    b["sqs"].queues = state["sqs"]


def _rebuild_limited_dict(values: dict[str, Any]) -> Any:
    from moto.dynamodb.models.dynamo_type import LimitedSizeDict

    rebuilt = LimitedSizeDict.__new__(LimitedSizeDict)
    dict.update(rebuilt, values)  # the items passed the size check when written: not checked again, O(n) not O(n^2)
    return rebuilt


def _rebuild_key_store(values: dict[str, list[Any]]) -> Any:
    from moto.s3.utils import _VersionedKeyStore

    rebuilt = _VersionedKeyStore()
    for name, versions in values.items():
        dict.__setitem__(rebuilt, name, versions)  # every version, not just the latest (its items() view)
    return rebuilt


def _key_value(key: Any) -> bytes:
    """An S3 object's bytes without its lock or moving its file offset: in a forked child, another thread of the
    parent may have held the lock at the fork, and a rolled-over buffer's file offset is shared with the parent."""
    buffer = key._value_buffer
    if buffer.closed:
        return b""
    inner = buffer._file
    if isinstance(inner, io.BytesIO):
        return inner.getvalue()
    size, chunks, offset = os.fstat(inner.fileno()).st_size, [], 0
    while offset < size:
        chunk = os.pread(inner.fileno(), size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _dispatch_table() -> dict[Any, Callable[[Any], Any]]:
    from moto.dynamodb.models.dynamo_type import LimitedSizeDict
    from moto.dynamodb.models.table import Table
    from moto.s3.models import FakeKey
    from moto.s3.utils import _VersionedKeyStore
    from moto.sqs.models import Queue

    def without(obj: Any, *names: str, **replaced: Any) -> tuple[Any, ...]:
        state = {k: v for k, v in obj.__dict__.items() if k not in names}
        state.update(replaced)
        return copyreg.__newobj__, (type(obj),), state  # type: ignore[attr-defined]

    def fake_key(key: Any) -> tuple[Any, ...]:
        return without(key, "lock", "_value_buffer", value=_key_value(key))  # FakeKey.__setstate__ rebuilds them

    table: dict[Any, Callable[[Any], Any]] = dict(copyreg.dispatch_table)
    table.update({
        LimitedSizeDict: lambda d: (_rebuild_limited_dict, (dict(d),)),
        _VersionedKeyStore: lambda d: (_rebuild_key_store, (dict(dict.items(d)),)),
        FakeKey: fake_key,
        # Stream mappings point at Lambda functions, which bootstrap makes again: not data
        Table: lambda t: without(t, lambda_event_source_mappings={}),
        Queue: lambda q: without(q, "_messages_lock", lambda_event_source_mappings={},
                                 _messages_lock=threading.Condition()),
        type(threading.Lock()): lambda _: (threading.Lock, ()),
        type(threading.RLock()): lambda _: (threading.RLock, ()),
        threading.Condition: lambda _: (threading.Condition, ()),
    })
    return table


def dump_snapshot(state: dict[str, Any], header: dict[str, Any], out: Any,
                  dispatch: dict[Any, Callable[[Any], Any]] | None = None) -> None:
    pickle.dump(header, out, protocol=5)
    pickler = pickle.Pickler(out, protocol=5)
    pickler.dispatch_table = dispatch or _dispatch_table()  # type: ignore[assignment]
    pickler.dump(state)


def write_snapshot(data_dir: DataDir, header: dict[str, Any], state: dict[str, Any],
                   dispatch: dict[Any, Callable[[Any], Any]] | None = None) -> int:
    """Write ``snapshot.pickle`` whole or not at all. Returns its size in bytes."""
    path = data_dir.snapshot
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds secrets: the owner's only
    with open(fd, "wb", buffering=1 << 20) as f:
        dump_snapshot(state, header, f, dispatch)
        f.flush()
        os.fsync(f.fileno())
        size = f.tell()
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return size


def read_snapshot(path: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    if not path.exists():
        return None
    gc_was = gc.isenabled()
    gc.disable()  # millions of small objects: the collector would rescan them all while they are made (4x slower)
    try:
        with open(path, "rb") as f:
            header = pickle.load(f)
            state = pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError) as exc:
        raise DataDirError(f"the snapshot {path} cannot be read ({type(exc).__name__}: {exc}); the folder was left "
                           "as it is") from exc
    finally:
        if gc_was:
            gc.enable()
    return header, state


# ---------------------------------------------------------------------------------------------------------------------
# Journal records
# ---------------------------------------------------------------------------------------------------------------------


def _frame(payload: bytes) -> bytes:
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def read_segment(path: Path, *, last: bool) -> Iterator[tuple[Any, ...]]:
    """The records of one segment. A torn record at the end of the last segment (the process died inside the
    write, so its request got no answer) ends it, and is cut off the file (so the segment, no longer the last
    once this process writes, reads whole next time); anything else damaged is a ``DataDirError``."""
    data = path.read_bytes()
    offset = 0
    while offset < len(data):
        torn = len(data) - offset < _HEADER.size
        if not torn:
            length, crc = _HEADER.unpack_from(data, offset)
            payload = data[offset + _HEADER.size: offset + _HEADER.size + length]
            torn = len(payload) < length or zlib.crc32(payload) != crc
        if torn:
            if last and _only_tail(data, offset):
                log.warning("journal %s: a torn last record at byte %d was dropped (it was never answered)",
                            path.name, offset)
                os.truncate(path, offset)
                return
            raise DataDirError(f"journal {path} is damaged at byte {offset} of {len(data)}; the folder was left as "
                               "it is")
        yield pickle.loads(payload)
        offset += _HEADER.size + length


def _only_tail(data: bytes, offset: int) -> bool:
    """A torn write leaves at most one partial record: nothing decodable may follow it."""
    if len(data) - offset < _HEADER.size:
        return True
    length, _ = _HEADER.unpack_from(data, offset)
    return offset + _HEADER.size + length >= len(data)


# ---------------------------------------------------------------------------------------------------------------------
# SQS by meaning: message ids instead of receipt handles
# ---------------------------------------------------------------------------------------------------------------------


def _queue_for(url_or_name: str) -> Any:
    name = url_or_name.rstrip("/").rsplit("/", 1)[-1]
    return _backends()["sqs"].queues.get(name)


def _sqs_ids_for_handles(body: dict[str, Any], batch: bool) -> tuple[str, list[str]]:
    queue = _queue_for(str(body.get("QueueUrl", "")))
    handles = [e.get("ReceiptHandle") for e in body.get("Entries", [])] if batch else [body.get("ReceiptHandle")]
    ids: list[str] = []
    if queue is not None:
        for handle in handles:
            ids.extend(m.id for m in list(queue._messages) if handle and m.had_receipt_handle(handle))
    return str(body.get("QueueUrl", "")), ids


def _sqs_delete_ids(queue_url: str, ids: Iterable[str]) -> None:
    queue = _queue_for(queue_url)
    if queue is None:
        return
    gone = set(ids)
    with queue._messages_lock:
        for message in [m for m in queue._messages if m.id in gone]:
            queue.pending_messages.discard(message)
        queue._messages = [m for m in queue._messages if m.id not in gone]


def _sqs_sent_ids(operation: str, response: bytes) -> dict[str, str]:
    """``{entry id (or ""): message id}`` from a SendMessage(Batch) JSON answer."""
    try:
        answer = json.loads(response or b"{}")
    except ValueError:
        return {}
    if operation == "SendMessage":
        return {"": str(answer["MessageId"])} if "MessageId" in answer else {}
    return {str(e["Id"]): str(e["MessageId"]) for e in answer.get("Successful", []) if "MessageId" in e}


def _sqs_restore_ids(queue_url: str, replayed: dict[str, str], original: dict[str, str]) -> None:
    """Give the messages a replayed send made the ids the first send answered (a deduplicated send made none)."""
    queue = _queue_for(queue_url)
    if queue is None:
        return
    by_id = {m.id: m for m in queue._messages[-len(replayed):]} if replayed else {}
    for entry, new_id in replayed.items():
        message = by_id.get(new_id)
        if message is not None and entry in original:
            message.id = original[entry]


# ---------------------------------------------------------------------------------------------------------------------
# The journal: a WSGI layer in front of moto, snapshots, recovery
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class Recovery:
    """What a start found and did."""

    snapshot_bytes: int = 0
    records: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    """CPU of the whole process while it loaded (nothing else runs then)."""
    stream_batches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


class Journal:
    """The WSGI application the moto server runs when state is kept: ``app`` (moto's) behind the journal."""

    def __init__(self, data_dir: DataDir, app: Any, *, snapshot_bytes: int | None = None,
                 pending_streams: Callable[[], list[tuple[str, dict[str, Any]]]] = list) -> None:
        self.data_dir = data_dir
        self.app = app
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
            install_state(state)
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
            _clear_stream_backlog(table)
            return
        if kind == "sqs-delete":
            _, queue_url, ids = record
            _sqs_delete_ids(queue_url, ids)
            return
        _, saved, body, extra = record
        environ = dict(saved)
        environ.update({"wsgi.input": io.BytesIO(body), "wsgi.errors": io.StringIO(), "wsgi.version": (1, 0),
                        "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False})
        _, response = _call(self.app, environ)
        if extra and extra.get("sent"):
            answered = _sqs_sent_ids(extra["operation"], response)
            _sqs_restore_ids(extra["queue"], answered, extra["sent"])

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
                queue_url, ids = _sqs_ids_for_handles(_json(body), mutation.operation == "DeleteMessageBatch")
                record = ("sqs-delete", queue_url, ids)
            status, response, headers = _call_capturing(self.app, environ)
            if record is None:
                if mutation.service == "sqs" and mutation.operation in ("SendMessage", "SendMessageBatch"):
                    extra = {"operation": mutation.operation, "queue": str(_json(body).get("QueueUrl", "")),
                             "sent": _sqs_sent_ids(mutation.operation, response)}
                record = ("http", saved, body, extra)
            self._append(pickle.dumps(record, protocol=5))
            self._maybe_snapshot()
        start_response(status, headers)
        return [response]

    def mark_idle(self, consumer: str, table: str, still_idle: Callable[[], bool]) -> None:
        """Journal that ``consumer`` delivered every stream record made so far (if it still has nothing queued
        once the lock is held: records are queued inside the writes that make them, under the same lock)."""
        with self.lock:
            if self.closed or self._fd < 0 or not still_idle():
                return
            self._append(pickle.dumps(("idle", consumer, table), protocol=5))

    def _append(self, payload: bytes) -> None:
        view = memoryview(_frame(payload))
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self.since_snapshot += len(payload) + _HEADER.size

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
        header, state, dispatch = self._header(through, self.pending_streams()), collect_state(), _dispatch_table()
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
                log.error("the snapshot child %d failed (status %d); the journal is kept and a snapshot is tried "
                          "again later", pid, status)
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
            size = write_snapshot(self.data_dir, self._header(through, self.pending_streams()), collect_state())
            self.since_snapshot = 0
            self.snapshots += 1
        for number in self.data_dir.segments():
            if number <= through:
                self.data_dir.segment(number).unlink()
        return size

    def _header(self, through: int, streams: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
        return {"format": FORMAT, "host": host_version(), "moto": moto_version(), "through": through,
                "streams": streams}

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


def _clear_stream_backlog(table_name: str) -> None:
    table = _backends()["dynamodb"].tables.get(table_name)
    if table is not None and table.stream_shard is not None:
        table.stream_shard.items = []


def flush_stream_backlog() -> int:
    """Hand the stream records replay made (kept on each table's shard while no mapping existed) to the mappings
    bootstrap made, as moto would at the table's next write. Returns how many records were handed over."""
    from moto.awslambda.utils import get_backend

    handed = 0
    for table in list(_backends()["dynamodb"].tables.values()):
        shard = table.stream_shard
        if shard is None or not shard.items or not table.lambda_event_source_mappings:
            continue
        for arn, esm in table.lambda_event_source_mappings.items():
            get_backend(DEFAULT_ACCOUNT, arn.split(":")[3]).send_dynamodb_items(arn, shard.items,
                                                                                esm.event_source_arn)
        handed += len(shard.items)
        shard.items = []
    return handed


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


def _call_capturing(app: Any, environ: dict[str, Any]) -> tuple[str, bytes, list[tuple[str, str]]]:
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
    status, body, _ = _call_capturing(app, environ)
    return status, body


def _refuse(start_response: Any) -> list[bytes]:
    body = json.dumps({"__type": "ServiceUnavailable", "message": "the local host is stopping"}).encode()
    start_response("503 Service Unavailable", [("Content-Type", "application/x-amz-json-1.0"),
                                               ("Content-Length", str(len(body)))])
    return [body]
