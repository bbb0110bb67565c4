"""Many source runs read and checked at once: RFC 0252 §C for every source a suite names (issue 24, a suite
registered with ``sourceRunId`` tasks and ``:from-runs``), with the reads batched across runs and run in parallel
(docs/decisions/0121-from-runs-at-ten-thousand.md).

What one check needs of a run, and how it is read:
- its run item and creation facts (status, kind, tenant; not its state): BatchGetItem, 100 keys a request whatever
  run they belong to;
- a workflow run's event log (the agent ran there, the calls it shows, the invocation's input and decision): the
  stored page ending at its last sequence (the run item names it), by key, 100 a request; a short run's whole log is
  that one page, and what comes before it, or a log longer than a page, is read by Query;
- its pinned definition, only when a task is built from it (the agent node's bindings): 100 a request;
- the as-executed records of the calls its log shows, by the keys the engine wrote them under
  (``AgentLog.call_keys``), 100 a request. A run whose keys cannot be derived (an eval run) or whose records do not
  all match is read the way a single check reads it (``evals.usable_source``: one Query of its records).
Every check is ``evals.source_calls``, the same as for one ``fixtureRuns`` entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shared.engine import kernel, recorded
from shared.errors import RunGoneError
from shared.ports import EVENTS_PER_PAGE, Ports, RunRecord, ToolCallRecord
from shared.protocol.ids import BadIdError, decode_run_id, tenant_of
from shared.services import evals
from shared.services.common import Caller, chunks, parallel

BATCH_KEYS = 100  # BatchGetItem's most
RUN_KEYS = 2  # a run's item and its creation facts
LONG_LOG = EVENTS_PER_PAGE  # a log of more events than one stored page holds is read by Query, on its own


@dataclass
class Source:
    rec: RunRecord
    calls: list[ToolCallRecord]  # the agent's own as-executed calls
    log: recorded.AgentLog


def read_runs(ports: Ports, run_ids: Sequence[str]) -> dict[str, RunRecord]:
    """The runs' items and creation facts (no state), ``BATCH_KEYS / RUN_KEYS`` runs a request, in parallel."""
    found: dict[str, RunRecord] = {}
    for part in parallel(
        lambda ids: ports.runs.get_runs(ids, state=False), chunks(list(run_ids), BATCH_KEYS // RUN_KEYS)
    ):
        found.update(part)
    return found


def named(
    ports: Ports, caller: Caller, values: Sequence[str], agent_id: str, *, replay: bool = False
) -> list[Source | None]:
    """Every value a request names, checked (in order): its ``Source``, or None when it is not usable (the caller
    refuses it uniformly): an id that does not decode, another tenant's (never read: a key that cannot exist is read
    in its place, as ``common.reference`` does), unknown, or unusable."""
    ids: list[str | None] = []
    for value in values:
        try:
            run_id: str | None = decode_run_id(value)
        except BadIdError:
            run_id = None
        ids.append(run_id if run_id is not None and tenant_of(run_id) == caller.tenant else None)
    unreadable = f"{caller.tenant}/~"
    recs = read_runs(ports, [i if i is not None else unreadable for i in ids])
    distinct = list(dict.fromkeys(i for i in ids if i is not None and i in recs))
    checked = dict(zip(distinct, check(ports, [recs[i] for i in distinct], agent_id, replay=replay), strict=True))
    return [checked.get(i) if i is not None else None for i in ids]


def check(ports: Ports, recs: Sequence[RunRecord], agent_id: str, *, replay: bool = False) -> list[Source | None]:
    """RFC 0252 §C for runs already read: each one's ``Source``, or None when it is unusable (in order)."""
    live = [r for r in recs if r.terminal]
    flows = [r for r in live if r.kind != "eval"]
    logs, defs = _logs(ports, flows, replay=replay)
    got: dict[str, Source | None] = {}
    by_keys: dict[str, recorded.AgentLog] = {}
    for rec in flows:
        events = logs.get(rec.run_id)
        if events is None:  # a stored body is gone: the host no longer holds it
            got[rec.run_id] = None
            continue
        log = recorded.read_agent_log([events], agent_id, definition=defs.get(rec.run_id) if replay else None)
        if not log.invoked or (replay and not log.replayable):
            got[rec.run_id] = None
        elif not log.call_ids:
            got[rec.run_id] = _source(rec, [], log, agent_id, replay)
        elif log.call_ids <= set(log.call_keys):
            by_keys[rec.run_id] = log
    slow = [r for r in live if r.kind == "eval" or (r.run_id not in got and r.run_id not in by_keys)]
    got.update(_by_keys(ports, [r for r in flows if r.run_id in by_keys], by_keys, agent_id, replay, slow))
    for rec, src in zip(slow, parallel(lambda r: _one(ports, r, agent_id, replay), slow), strict=True):
        got[rec.run_id] = src
    return [got.get(r.run_id) for r in recs]


def _source(
    rec: RunRecord, records: list[ToolCallRecord], log: recorded.AgentLog, agent_id: str, replay: bool
) -> Source | None:
    mine = evals.source_calls(records, log, agent_id, replay=replay)
    return Source(rec, mine, log) if mine is not None else None


def _logs(
    ports: Ports, recs: Sequence[RunRecord], *, replay: bool
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, Any]]]:
    """The runs' whole logs (a run whose log cannot be read left out) and, with ``replay``, their definitions (a
    small one is in the run's creation facts: decision 0178; the others are read)."""
    short = [r for r in recs if r.last_seq + 1 <= LONG_LOG]
    jobs: list[tuple[str, Any]] = [("logs", g) for g in chunks(short, BATCH_KEYS)]
    jobs += [("log", r) for r in recs if r.last_seq + 1 > LONG_LOG]
    inline: dict[str, dict[str, Any]] = {}
    if replay:  # as ``kernel.stored_definition`` reads one run's, batched: only the items that exist are read
        inline = {r.run_id: d for r in recs if (d := kernel.inline_definition(r)) is not None}
        items = [r.run_id for r in recs if kernel.pinned(r) and r.run_id not in inline]
        jobs += [("definitions", g) for g in chunks(items, BATCH_KEYS)]

    def run(job: tuple[str, Any]) -> tuple[str, dict[str, Any]]:
        kind, arg = job
        if kind == "definitions":
            return kind, dict(ports.runs.get_definitions(arg))
        if kind == "logs":
            try:
                return kind, dict(ports.events.read_logs({r.run_id: r.last_seq for r in arg}))
            except RunGoneError:  # one of them has an event whose stored body is gone: read them one by one
                return kind, {k: v for r in arg for k, v in _whole_log(ports, r).items()}
        return kind, _whole_log(ports, arg)

    logs: dict[str, list[dict[str, Any]]] = {}
    defs: dict[str, dict[str, Any]] = dict(inline)
    for kind, part in parallel(run, jobs):
        (defs if kind == "definitions" else logs).update(part)
    return logs, defs


def _whole_log(ports: Ports, rec: RunRecord) -> dict[str, list[dict[str, Any]]]:
    try:
        return {rec.run_id: [ev for page in ports.events.iter_events(rec.run_id) for ev in page]}
    except RunGoneError:
        return {}


def _by_keys(
    ports: Ports,
    recs: list[RunRecord],
    logs: dict[str, recorded.AgentLog],
    agent_id: str,
    replay: bool,
    slow: list[RunRecord],
) -> dict[str, Source | None]:
    """The checks of runs whose records are read by the keys their logs name; a run whose records do not all match
    (a record missing, another call under its key) is added to ``slow`` (read by Query)."""
    wanted = [(r.run_id, key) for r in recs for key in logs[r.run_id].call_keys.values()]
    found: dict[tuple[str, str], ToolCallRecord] = {}

    def read(keys: list[tuple[str, str]]) -> dict[tuple[str, str], ToolCallRecord]:
        try:
            return ports.tool_calls.get_calls(keys)
        except RunGoneError:  # a record's stored body is gone: those runs are read one by one
            return {}

    for part in parallel(read, chunks(wanted, BATCH_KEYS)):
        found.update(part)
    out: dict[str, Source | None] = {}
    for rec in recs:
        log = logs[rec.run_id]
        records = [found.get((rec.run_id, key)) for key in log.call_keys.values()]
        if any(r is None or r.call_id != call_id for r, call_id in zip(records, log.call_keys, strict=True)):
            slow.append(rec)
            continue
        out[rec.run_id] = _source(rec, [r for r in records if r is not None], log, agent_id, replay)
    return out


def _one(ports: Ports, rec: RunRecord, agent_id: str, replay: bool) -> Source | None:
    """One run read the way ``evals.usable_source`` reads it (its records by Query, its log, an eval run's plan)."""
    try:
        records = ports.tool_calls.list_calls(rec.run_id)
        log = evals.source_log(ports, rec, agent_id, replay=replay)
    except RunGoneError:
        return None
    return _source(rec, records, log, agent_id, replay)
