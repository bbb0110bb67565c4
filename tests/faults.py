"""Fault injection at the AWS SDK boundary (botocore event hooks), never by replacing our own code.

Shared by the fault-injection tests and ``make bench``:

- ``throttle_writes``: every other write call that mentions a marker is answered ``ThrottlingException``
  before it reaches the table (botocore's standard retry mode must absorb it);
- ``kill_after_write``: the n-th ``TransactWriteItems`` that mentions a marker succeeds, then the caller gets an
  exception, as if the Lambda task died right after its write (Step Functions retries the task);
- ``check_run``: the invariants every run keeps whatever was injected.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.helpers import hooked

MAX_HOLD_MS = 1500  # the longest hold a randomized run waits (the in-task sleep path) before its side effect
WRITES = ("TransactWriteItems", "PutItem", "UpdateItem", "BatchWriteItem", "DeleteItem")
MIN_BASE64 = 12  # characters: 9 bytes, enough to hold the shortest needle the scans look for
BASE64_RUN = re.compile(rf"[A-Za-z0-9+/_-]{{{MIN_BASE64},}}={{0,2}}")
MAX_INFLATED = 64 * 1024 * 1024


class InjectedCrash(Exception):
    """The task 'died' right after a write that DynamoDB applied."""


@dataclass
class Injected:
    throttled: int = 0
    crashed: int = 0
    seen: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data

    def read(self, *_: Any) -> bytes:
        return self._data


def _inflated(data: bytes) -> bytes | None:
    """``data`` decompressed when it is a zlib or gzip stream (or, failing both, raw deflate), else None."""
    for wbits in (47, -15):  # 47: zlib or gzip, by the header; -15: a raw deflate stream
        try:
            out = zlib.decompressobj(wbits).decompress(data, MAX_INFLATED)
        except zlib.error:
            continue
        if out:
            return out
    return None


def _readable(value: Any) -> str:
    """A value JSON cannot hold, as text: binary inflated when it is compressed (a page of events, a large host
    document), so what it holds can be searched like the rest."""
    if isinstance(value, bytes | bytearray):
        inflated = _inflated(bytes(value))
        return (inflated if inflated is not None else bytes(value)).decode("utf-8", "replace")
    return str(value)


def _decoded_runs(text: str) -> Iterator[bytes]:
    """The bytes of every base64 or base64url run in ``text``, decoded at each of the 4 alignments it may start at
    (a run's first characters may belong to a word before it: ``whsec_...``)."""
    for run in BASE64_RUN.findall(text):
        std = run.replace("-", "+").replace("_", "/").rstrip("=")
        for skip in range(4):
            body = std[skip:]
            body = body[: len(body) - len(body) % 4]
            if len(body) >= MIN_BASE64:
                yield base64.b64decode(body)


def views(data: bytes | str, depth: int = 2) -> Iterator[str]:
    """``data`` as text, then what it holds inflated and base64-decoded (to ``depth``): the forms in which a stored
    value may carry a needle without spelling it."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    text = data if isinstance(data, str) else raw.decode("utf-8", "replace")
    yield text
    if depth == 0:
        return
    inflated = _inflated(raw) if isinstance(data, bytes) else None
    if inflated is not None:
        yield from views(inflated, depth - 1)
    for blob in _decoded_runs(text):
        yield from views(blob, depth - 1)


def holds(data: bytes | str, needles: list[str]) -> list[str]:
    """The needles ``data`` holds in any of its ``views``: raw, compressed, base64, or base64 of compressed."""
    left = list(needles)
    for text in views(data):
        left = [n for n in left if n not in text]
        if not left:
            break
    return [n for n in needles if n not in left]


def as_text(value: Any) -> str:
    """A request's parameters or an item as searchable text (compressed binary inflated)."""
    return json.dumps(value, default=_readable)


def _mentions(params: Any, markers: tuple[str, ...]) -> str | None:
    text = as_text(params)
    return next((m for m in markers if m in text), None)


@contextmanager
def throttle_writes(client: Any, markers: tuple[str, ...]) -> Iterator[Injected]:
    from botocore.awsrequest import AWSResponse

    got = Injected()

    def before_call(model: Any = None, params: Any = None, context: Any = None, **_: Any) -> None:
        if model.name in WRITES and _mentions(params, markers):
            with got.lock:
                got.seen["n"] = got.seen.get("n", 0) + 1
                if got.seen["n"] % 2 == 1:
                    context["openwop_throttle"] = True

    def before_send(request: Any = None, **_: Any) -> Any:
        if not request.context.get("openwop_throttle"):
            return None
        request.context["openwop_throttle"] = False  # only the first attempt; botocore's retry goes through
        with got.lock:
            got.throttled += 1
        body = json.dumps(
            {
                "__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException",
                "message": "Rate of requests exceeds the allowed throughput.",
            }
        ).encode()
        return AWSResponse(
            request.url,
            400,
            {"x-amzn-ErrorType": "ThrottlingException", "Content-Type": "application/x-amz-json-1.0"},
            _Body(body),
        )

    with hooked(client, {"before-call.dynamodb.*": before_call, "before-send.dynamodb.*": before_send}):
        yield got


@contextmanager
def _kill_after(
    client: Any, operation: str, key_of: Callable[[dict[str, Any]], str | None], nth: Callable[[str], int]
) -> Iterator[Injected]:
    """The ``nth(key)``-th ``operation`` request whose parameters ``key_of`` names ``key`` is applied, then the
    caller crashes (once per key)."""
    got = Injected()

    def before_call(params: Any = None, context: Any = None, **_: Any) -> None:
        context["openwop_key"] = key_of(params)

    def after_call(http_response: Any = None, context: Any = None, **_: Any) -> None:
        key = (context or {}).get("openwop_key")
        if key is None or http_response is None or http_response.status_code != 200:
            return
        with got.lock:
            got.seen[key] = got.seen.get(key, 0) + 1
            if got.seen[key] != nth(key):
                return
            got.crashed += 1
        raise InjectedCrash(f"task killed after {operation} {nth(key)} of {key}")

    client.meta.events.register(f"before-parameter-build.dynamodb.{operation}", before_call)
    client.meta.events.register(f"after-call.dynamodb.{operation}", after_call)
    try:
        yield got
    finally:
        client.meta.events.unregister(f"before-parameter-build.dynamodb.{operation}", before_call)
        client.meta.events.unregister(f"after-call.dynamodb.{operation}", after_call)


def kill_after_write(client: Any, plan: dict[str, int]) -> Any:
    """``plan``: marker -> n. The n-th transaction mentioning the marker is applied, then the caller crashes."""

    def marker(params: dict[str, Any]) -> str | None:
        creates = any(
            ((i.get("Put") or {}).get("Item") or {}).get("sk") == {"S": "RUN"} for i in params.get("TransactItems", [])
        )
        # the run's creation is the API's write, not a task's: count from the first task write on
        return None if creates else _mentions(params, tuple(plan))

    return _kill_after(client, "TransactWriteItems", marker, plan.__getitem__)


def kill_after_plain_page(client: Any, table: str, n: int) -> Any:
    """The n-th page put plainly into ``table`` (decision 0170: a task's middle page) is applied, then its task
    crashes; once."""

    def plain(params: dict[str, Any]) -> str | None:  # a page put alone: only plain pages go by PutItem
        return "plain" if params.get("TableName") == table and "page" in (params.get("Item") or {}) else None

    return _kill_after(client, "PutItem", plain, lambda _: n)


def check_run(events: list[dict[str, Any]]) -> list[str]:
    """What must hold for every run whatever was injected: the problems found (empty when none)."""
    problems = []
    seqs = [int(e["sequence"]) for e in events]
    if seqs != list(range(len(seqs))):
        problems.append(f"sequence gap or duplicate: {seqs}")
    terminal = [e for e in events if e["type"] in ("run.completed", "run.failed", "run.cancelled")]
    if len(terminal) != 1 or events[-1] is not terminal[0]:
        problems.append(f"terminal events: {[e['type'] for e in terminal]}")
    ids = [e["eventId"] for e in events]
    if len(set(ids)) != len(ids):
        problems.append("duplicated eventId")
    started = [e["type"] for e in events].count("run.started")
    if started > 1:  # a task taken up again started the run over (decision 0184); one failed unstarted has none
        problems.append(f"run.started {started} times")
    keyed = [
        (e["type"], e.get("nodeId"), json.dumps(e.get("payload"), sort_keys=True))
        for e in events
        if e["type"] in ("node.started", "agent.tool-called")
    ]
    if len(set(keyed)) != len(keyed):
        problems.append("an event was duplicated")
    return problems


# --------------------------------------------------------------------------- randomized cancels and erasure scans


def cancel_at_random(client: Any, rng: Any, workflow_id: str = "conformance-replay-side-effect") -> tuple[str, str]:
    """Create a run with a 0-1.5 s hold before its side effect, cancel it at a random point: (runId, how)."""
    import time

    from openwop_client.types import CreateRunRequest

    run = client.runs_create(CreateRunRequest(workflowId=workflow_id, inputs={"delayMs": rng.randint(0, MAX_HOLD_MS)}))
    time.sleep(rng.uniform(0, 1.6))  # the scenario's random cancel point (up to just past the longest hold), not a wait
    try:
        client.runs_cancel(run.runId)
        return run.runId, "cancelled"
    except Exception as exc:  # the run had already completed: 409 run_terminal
        if getattr(exc, "status", None) != 409 and "already terminal" not in str(exc):
            raise
        return run.runId, "late"


def effects_after_cancel(ports: Any, tenant: str, run_id: str, cancelled_at: str) -> int:
    """Ledger rows of a cancelled run written after it was cancelled (must be 0)."""
    return sum(1 for _, row in ports.host.query(f"LEDGER#{tenant}", run_id + "#") if row["at"] > cancelled_at)


def scan_for(ddb: Any, s3: Any, tables: list[str], bucket: str, needles: list[str]) -> list[tuple[str, str]]:
    """Every (table or object, needle) where an item or object still holds a needle, tombstones included: raw,
    compressed (zlib, gzip, raw deflate: a page of events, a large document), base64 or base64url, or base64 of
    compressed (``views``), in an item's attributes, an object's key or its body.

    A tombstone is what refuses late writes for an erased id: it is keyed by a keyed hash of the id and holds its
    tenant and when, nothing else (never the id).
    """
    found: list[tuple[str, str]] = []
    for table in tables:
        for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
            for item in page["Items"]:
                if item.get("sk", {}).get("S") == "TOMBSTONE" and (
                    set(item) != {"pk", "sk", "tenant", "erasedAt", "expiresAt"}
                    or not item["pk"]["S"].startswith("ERASED#")
                ):
                    found.append((table, "tombstone with content"))
                found += [(table, n) for n in holds(as_text(item), needles)]
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
            in_key = holds(obj["Key"], needles)
            found += [(obj["Key"], n) for n in needles if n in in_key or n in holds(body, needles)]
    return found


@contextmanager
def crash_before_write(client: Any, table: str, marker: str, times: int = 1) -> Iterator[Injected]:
    """The first ``times`` TransactWriteItems into ``table`` mentioning ``marker`` never reach DynamoDB: the caller
    crashes just before it, as a Lambda task dying between an outside call and its record."""
    got = Injected()

    def before(params: Any = None, **_: Any) -> None:
        items = params.get("TransactItems", [])
        if not any(table in json.dumps(i, default=str) for i in items) or marker not in as_text(params):
            return
        with got.lock:
            if got.crashed >= times:
                return
            got.crashed += 1
        raise InjectedCrash("task killed before its write")

    client.meta.events.register("before-parameter-build.dynamodb.TransactWriteItems", before)
    try:
        yield got
    finally:
        client.meta.events.unregister("before-parameter-build.dynamodb.TransactWriteItems", before)
