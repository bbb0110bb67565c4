"""A fork's source: its index, built by the first task of the fork's execution (never inside the request), and
the copy of its prefix, made by the next tasks (``copy_prefix``), for workflow and eval forks alike.

What a fork re-executes needs from its source, and only that (docs/decisions/0083-fork-request-and-index.md):

- per side-effecting node of the child's definition, its terminal outcomes in order (a replay resolves the n-th
  execution from the n-th outcome);
- per approval gate, its interrupt resolutions in order (a replay never asks again);
- the source's as-executed tool calls (a replay serves each from the record; a branch of an eval run serves the
  prefix's).

A replay also gets one 8-byte digest per source event (BLAKE2b of the canonical form of what it must reproduce:
type, nodeId and payload without clock fields), in one S3 object read by range as the replay goes: comparing its
events costs a few kilobytes per thousand events instead of a second read of the source log. Only at a mismatch
is the source event itself read (once: a replay stops comparing after its first divergence).

The index is written once under the child (``FORKSOURCE``, S3 when large) and is immutable: a task reads it
once, and a warm container keeps the last one it read.

Reading the whole source log also proves it is whole: if events are missing (past retention, or purged), the
child fails ``run_expired`` with ``{sourceRunId, fromSeq, boundary}`` (the request refuses the common case, a
missing first event, with ``410`` at once).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from typing import Any

from shared.caches import LockedLRUCache
from shared.engine import state as st
from shared.engine.canonical import canonical_bytes
from shared.engine.kernel import (
    LEFT,
    discard_late_writes,
    halt,
    keep_left,
    load_state,
    make_event,
    read_for_task,
    run_workflow,
    state_updates,
)
from shared.engine.runcore import OutcomeIndex
from shared.engine.runcore import comparable as comparable  # what a replay reproduces: the pure core's
from shared.engine.runcore import divergence as divergence
from shared.engine.runcore import side_effect_nodes as side_effect_nodes_of
from shared.engine.stamps import prior_stamp
from shared.engine.workflow import Workflow
from shared.errors import ConflictError, RunGoneError
from shared.keys import FORK_SOURCE_SK
from shared.ports import TASK_STAMP, WRITABLE, Ports, RunRecord, ToolCallRecord
from shared.protocol import codes as c

INLINE_INDEX_LIMIT = 300_000
DIGEST_SIZE = 8  # bytes per source event; a collision (2^-64 per event) would hide one divergence
DIGEST_PAGE = 16_384  # digests per ranged read (128 KB)
# Events a prefix-copy task copies: each task reads the run, stores its progress and state, and costs its execution two
# state transitions and an invocation, so fewer, larger tasks cost less; 25,000 events (~6.7 MB of JSON, 253 pages,
# 11 BatchWriteItems) raise the task's resident set by about 46 MB (bench_memory: 0.20 of its 512 MB with the import;
# 11 MB with 10,000, 107 MB with 50,000), well inside its memory and time.
COPY_EVENTS = 25_000

_cache: LockedLRUCache[str, dict[str, Any]] = LockedLRUCache(
    maxsize=1
)  # child run id -> its index (immutable once written)


def event_digest(ev: dict[str, Any]) -> bytes:
    """The digest a replay compares its event with (the source's, stored by ``build``)."""
    return hashlib.blake2b(canonical_bytes(comparable(ev)), digest_size=DIGEST_SIZE).digest()


def digests_key(run_id: str) -> str:
    return f"runs/{run_id}/fork-digests.bin"


# A page of a replay's digests ((object, first sequence)): immutable, so a warm container keeps the last one read.
_digest_pages: LockedLRUCache[tuple[str, int], bytes] = LockedLRUCache(maxsize=1)


def digest_at(ports: Ports, digests: dict[str, Any], seq: int, run_id: str) -> bytes | None:
    """The digest of the source's event at ``seq`` (None past the source's end) from the index's ``digests``
    (``{key, events}``): one ranged S3 read per ``DIGEST_PAGE`` events, the page replacing the last. A replay
    asks in increasing order, so it reads each page once."""
    if seq < 0 or seq >= int(digests["events"]):
        return None
    first = seq - seq % DIGEST_PAGE
    key = str(digests["key"])
    page = _digest_pages.get((key, first))
    if page is None:
        page = ports.blobs.get_range(key, first * DIGEST_SIZE, (first + DIGEST_PAGE) * DIGEST_SIZE)
        if page is None:
            raise RunGoneError(run_id)
        _digest_pages[(key, first)] = page
    at = (seq - first) * DIGEST_SIZE
    return page[at : at + DIGEST_SIZE]


def reproduces(
    ports: Ports, digests: dict[str, Any], source_run_id: str, seq: int, ev: dict[str, Any], run_id: str
) -> tuple[bool, dict[str, Any] | None]:
    """Whether ``ev`` reproduces the source's event at ``seq`` (compared by digest), and at a mismatch that
    source event (one read; None past the source's end)."""
    digest = digest_at(ports, digests, seq, run_id)
    if digest is not None and digest == event_digest(ev):
        return True, None
    got = ports.events.read_page(source_run_id, seq - 1, 1, settled=True) if digest is not None else []
    return False, (got[0] if got else None)


def build(
    ports: Ports,
    source_run_id: str,
    last_seq: int,
    side_effect_nodes: set[str] | None,
    digests: bytearray | None = None,
    prefix_upto: int | None = None,
) -> tuple[dict[str, Any], int]:
    """Index the source's log up to ``last_seq``; return the index and how many events were found.

    ``side_effect_nodes``: the nodes whose outcomes a replay resolves (None: none, an eval run's fork).
    ``digests``: when given, each event's digest is appended to it, in sequence order.
    ``prefix_upto`` (an eval run's fork: its ``fromSeq``): also index what the copied prefix fixed, the callIds
    of the tool calls returned before it and each invocation's model calls before it (``prefix``)."""
    recorded = OutcomeIndex(side_effect_nodes or ())
    resolutions: dict[str, list[dict[str, Any]]] = {}
    prefix_calls: list[str] = []
    prefix_turns: dict[str, int] = {}
    invocation: str | None = None
    called: list[str] = []  # the calls the log names: their records are read eventually consistently
    count = 0
    for page in ports.events.iter_events(source_run_id, -1, last_seq, settled=True):
        for ev in page:
            count += 1
            if digests is not None:
                digests += event_digest(ev)
            if prefix_upto is not None and int(ev["sequence"]) < prefix_upto:
                invocation = _prefix_fact(ev, invocation, prefix_calls, prefix_turns)
            if ev["type"] == c.AGENT_TOOL_CALLED:
                called.append(str((ev.get("payload") or {}).get("callId")))
            if ev["type"] == c.INTERRUPT_RESOLVED and ev.get("nodeId"):
                resolutions.setdefault(str(ev["nodeId"]), []).append(dict(ev.get("payload") or {}))
            else:
                recorded.add(ev)
    calls = [_call_entry(r) for r in ports.tool_calls.list_calls(source_run_id, named=called)]
    out: dict[str, Any] = {"outcomes": recorded.outcomes, "calls": calls, "resolutions": resolutions}
    if prefix_upto is not None:
        out["prefix"] = {"calls": prefix_calls, "turns": prefix_turns}
    return out, count


def _prefix_fact(
    ev: dict[str, Any], invocation: str | None, prefix_calls: list[str], prefix_turns: dict[str, int]
) -> str | None:
    """What an event of the copied prefix fixed: a returned call's callId, a model call of the current invocation;
    returns the current invocation (this event's, when it starts one)."""
    p = ev.get("payload") or {}
    if ev["type"] == c.AGENT_TOOL_RETURNED:
        prefix_calls.append(str(p.get("callId")))
    elif ev["type"] == c.AGENT_INVOCATION_STARTED:
        invocation = str(p.get("invocationId"))
    elif ev["type"] == c.PROVIDER_USAGE and invocation is not None:
        prefix_turns[invocation] = prefix_turns.get(invocation, 0) + 1
    return invocation


def _call_entry(r: ToolCallRecord) -> dict[str, Any]:
    """A source call's as-executed record as the index holds it (by invocation and call index)."""
    index = int(r.call_id.rsplit("#", 1)[1]) if "#" in r.call_id else 0
    return {
        "invocationId": r.invocation_id,
        "index": index,
        "toolName": r.tool_name,
        "args": r.args,
        "status": r.status,
        "result": r.result,
        "error": r.error,
        "durationMs": r.duration_ms,
        "miss": bool(r.extra.get("miss")),
        "transport": r.extra.get("transport"),
        **({"negotiation": r.extra["negotiation"]} if r.extra.get("negotiation") else {}),
    }


def needs_index(rec: RunRecord) -> bool:
    """Whether the fork ``rec`` resolves anything from its source (every fork but a workflow branch): only then is
    an index built and read (``load``)."""
    return not (rec.kind == "workflow" and rec.data["fork"].get("mode") == "branch")


def load(ports: Ports, run_id: str) -> dict[str, Any]:
    """The child's index: one read per container (it never changes once written); {} when none was written."""
    hit = _cache.get(run_id)
    if hit is not None:
        return hit
    got = ports.runs.get_aux(run_id, FORK_SOURCE_SK, settled=True)
    if got is not None and "blob" in got:
        got = ports.blobs.get_json(str(got["blob"]))
    if got is None:
        return {}
    _cache[run_id] = dict(got)
    return _cache[run_id]


def index_fork(ports: Ports, run_id: str, execution: str = "") -> dict[str, Any]:
    """The fork execution's first task: build and store the index (idempotent), or fail the child if the source's
    history is no longer whole. Answers like ``advance``: ``continue`` (go on to Advance) or ``done``. ``execution``:
    its execution's name (the first execution's Index task reads the run as its create left it: decision 0173). It
    writes nothing of the run item, so it hands the run as it read it to the first Advance task in its process, whose
    predecessor's stamp is the same (the create's: decision 0177)."""
    rec = read_for_task(ports, run_id, prior_stamp(execution, 0))
    if rec is None or rec.status not in WRITABLE:
        return halt(run_id, rec)
    fork = rec.data["fork"]
    if not needs_index(rec):
        # A workflow branch re-executes live after its prefix and resolves nothing from the source: it needs no
        # index, so nothing is read or written here (its prefix copy checks the prefix is whole).
        return {"runId": run_id, "next": "continue", "waitSeconds": 0}
    if rec.last_seq >= 0:  # a continued execution's Index: the index was stored before the fork's first event
        return {"runId": run_id, "next": "continue", "waitSeconds": 0}
    # Not read first: a retried Index task (its first delivery's answer lost) builds and stores it again, the same
    # index from the same source log, before any task reads it
    end = source_end(ports, fork)
    side: set[str] | None = None
    digests: bytearray | None = None
    if rec.kind == "workflow":
        wf = run_workflow(ports, rec)
        side = side_effect_nodes_of(wf)
    if fork.get("mode") == "replay":
        digests = bytearray()
    upto = int(fork["fromSeq"]) if rec.kind == "eval" else None
    source = str(fork["sourceRunId"])
    index, held = build(ports, source, end, side, digests, upto) if end is not None else ({}, 0)
    expected = (end + 1) if end is not None else 1
    if held != expected:
        details = {
            "sourceRunId": source,
            "fromSeq": int(fork["fromSeq"]),
            "boundary": max(0, expected - held),
        }
        return fail_expired(ports, rec, details)
    if digests is not None:
        ports.blobs.put_bytes(digests_key(run_id), bytes(digests))
        index["digests"] = {"key": digests_key(run_id), "events": held}
        # the first Advance task, in this container, compares with the first page from here (``digest_at``)
        _digest_pages[(digests_key(run_id), 0)] = bytes(digests[: DIGEST_PAGE * DIGEST_SIZE])
    if len(json.dumps(index, separators=(",", ":"))) > INLINE_INDEX_LIMIT:
        key = f"runs/{run_id}/fork-source.json"
        ports.blobs.put_json(key, index)
        ports.runs.put_aux(run_id, FORK_SOURCE_SK, {"blob": key}, rec.expires_at)
    else:
        ports.runs.put_aux(run_id, FORK_SOURCE_SK, index, rec.expires_at)
    _cache[run_id] = index  # the next task, in this container, reads it from here (``load``)
    # and the run, which this task wrote none of: the first Advance task here takes it (decision 0177)
    out = {"runId": run_id, "next": "continue", "waitSeconds": 0, LEFT: rec}
    keep_left(run_id, out)
    return out


def source_end(ports: Ports, fork: dict[str, Any]) -> int | None:
    """The last sequence of the source's log a fork resolves from: the source's ``lastSeq`` as its request read it
    (``sourceLastSeq`` in its creation facts: a fork is of its source as it stood when asked, decision 0180), so the
    fork's first task reads no item of the source's run. A fork created before read it again here (None: the source
    is gone)."""
    if "sourceLastSeq" in fork:
        return int(fork["sourceLastSeq"])
    src = ports.runs.get_run(str(fork["sourceRunId"]), settled=True)
    return None if src is None else src.last_seq


def fail_expired(ports: Ports, rec: RunRecord, details: dict[str, Any]) -> dict[str, Any]:
    """The source's history is gone: the child fails ``run_expired`` (its first and only events)."""
    error = {"code": c.RUN_EXPIRED, "message": "part of the source run's history is gone", "details": details}
    ev = make_event(ports, rec.run_id, rec.last_seq + 1, c.RUN_FAILED, {"error": error}, None)
    try:
        ports.events.append_events(
            rec.run_id,
            rec.last_seq + 1,
            [ev],
            run_updates={"status": "failed", "completedAt": ev["timestamp"], "error": error},
            require_status=WRITABLE,
            expires_at=rec.expires_at,
        )
    except (ConflictError, RunGoneError):
        pass
    return {"runId": rec.run_id, "next": "done", "waitSeconds": 0}


def copy_prefix(
    ports: Ports,
    rec: RunRecord,
    wf: Workflow | None = None,
    *,
    page_events: int = COPY_EVENTS,
    stamp: str = "",
    then: Callable[[RunRecord], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Copy the next page of the fork's prefix ``[0, fromSeq)`` (workflow or eval child), fold it and store the state:
    ceil(N/25) BatchWriteItem requests, then one conditional update (naming the task by ``stamp``, when given).

    ``then``: once the whole prefix is copied, the task goes on with it (a workflow fork's first steps), given the
    run as this copy left it, with no read of it (decision 0174): what the next task would have read, one task
    sooner."""
    fork = rec.data["fork"]
    from_seq = int(fork["fromSeq"])
    state = load_state(ports, rec, wf)
    copied: list[dict[str, Any]] = []
    for page in ports.events.iter_events(
        str(fork["sourceRunId"]), rec.last_seq, from_seq - 1, limit=page_events, settled=True
    ):
        for src in page:
            ev = dict(src)
            ev["runId"] = rec.run_id
            ev["eventId"] = ports.ids.event_id(rec.run_id, int(src["sequence"]))
            copied.append(ev)
    want = min(from_seq - 1, rec.last_seq + page_events) - rec.last_seq
    if [int(e["sequence"]) for e in copied] != list(range(rec.last_seq + 1, rec.last_seq + 1 + want)):
        # Part of the prefix is gone (past retention or purged): the child fails as its index task would.
        return fail_expired(
            ports,
            rec,
            {"sourceRunId": str(fork["sourceRunId"]), "fromSeq": from_seq, "boundary": max(0, want - len(copied))},
        )
    for ev in copied:
        st.apply(state, ev, wf)
    ports.events.copy_events(rec.run_id, copied, rec.expires_at)
    last = int(copied[-1]["sequence"])
    updates = state_updates(ports, rec, state, last)
    status = "running" if state["status"] != "pending" else "pending"
    if status != rec.status:  # named only when it changes (a listed field: the index entry is written with it)
        updates["status"] = status
    if stamp:
        updates[TASK_STAMP] = stamp
    try:
        ports.runs.set_progress(rec.run_id, rec.last_seq, last, updates)
    except ConflictError:
        if ports.runs.is_tombstoned(rec.run_id):
            # Erased while we copied (batch writes cannot check the tombstone): its hook may have run before
            # our writes landed, so remove what we wrote.
            discard_late_writes(ports, rec.run_id)
            raise RunGoneError(rec.run_id) from None
        raise
    if then is not None and last == from_seq - 1:
        del copied  # the events copied are stored and folded: the steps after them need none of them
        return then(
            dataclasses.replace(
                rec,
                last_seq=last,
                status=updates.get("status", rec.status),
                state=updates["state"],
                task_stamp=stamp or rec.task_stamp,
            )
        )
    return {"runId": rec.run_id, "next": "continue", "waitSeconds": 0}
