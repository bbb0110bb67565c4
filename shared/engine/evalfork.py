"""Forks of eval runs: the child re-executes the eval from ``fromSeq`` with the same trial executor.

The fork request copied the source's plan (suite, agent, modes, baseline, the keys of its stored derived
fixture copies: never the source runs they came from) to the child. Here the child's first tasks copy the
prefix, then each task re-runs the trials of one page of whole tasks in suite order (as the eval's Finish
pages) and appends that page's part of ``full[fromSeq:]``, where ``full`` is the eval's whole log as this code
produces it; the last page grades and completes the child. Tool calls:

- ``replay``: every call is resolved from the source eval run's as-executed record at the same
  (invocation, call index), args included; anything else fails closed. No live tool runs, ever.
- ``branch``: calls whose events lie in the copied prefix are fixed history (resolved from the record);
  the rest run under the task's fixture plan (derived copies re-read from S3, fail-closed) or live.

Model calls of a model-backed agent follow the same rule through the model-call log: a replay serves every one
from the source's log (never a provider call), a branch serves the prefix's and calls the model for the rest.

Divergence from the source is reported like a workflow replay (first divergent sequence).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shared.engine import evalpages, evalplan, evalrun, evaltrial, forkindex, grading
from shared.engine.canonical import same_json
from shared.engine.kernel import DIVERGED_AT, TASK_EVENTS, EngineError, make_event
from shared.engine.model_agent import ModelSession
from shared.engine.tools import ToolRuntime, ToolTally
from shared.errors import ConflictError, RunGoneError
from shared.ports import TASK_STAMP, Ports, RunRecord, StagedWrite
from shared.protocol import codes as c


def _head(ports: Ports, rec: RunRecord, plan: dict[str, Any]) -> list[dict[str, Any]]:
    """run.started and eval.started as the eval's Prepare emits them."""
    started, ev_started = evalrun.head_payloads(rec, plan)
    now = ports.clock.iso()
    return [
        {"type": c.RUN_STARTED, "payload": started, "timestamp": now},
        {"type": c.EVAL_STARTED, "payload": ev_started, "timestamp": now},
    ]


def _prefix(ports: Ports, rec: RunRecord, index: dict[str, Any], from_seq: int) -> dict[str, Any]:
    """What the copied prefix fixed: the callIds returned in it and each invocation's model calls in it (from the
    index; an index built before it held them: read from the child's prefix)."""
    if "prefix" in index:
        return dict(index["prefix"])
    calls: list[str] = []
    turns: dict[str, int] = {}
    current = None
    for e in ports.events.read_events(rec.run_id, -1, limit=max(0, from_seq)) if from_seq else []:
        if e["type"] == c.AGENT_TOOL_RETURNED:
            calls.append(str(e["payload"].get("callId")))
        elif e["type"] == c.AGENT_INVOCATION_STARTED:
            current = str(e["payload"].get("invocationId"))
        elif e["type"] == c.PROVIDER_USAGE and current is not None:
            turns[current] = turns.get(current, 0) + 1
    return {"calls": calls, "turns": turns}


def advance(
    ports: Ports,
    rec: RunRecord,
    *,
    max_events: int = TASK_EVENTS,
    max_ms: int = 60_000,
    tally: ToolTally | None = None,
    stamp: str = "",
    release: Sequence[StagedWrite] = (),  # an eval run's fork holds no slot (decision 0160): nothing to give back
) -> dict[str, Any]:
    """One page: copy the prefix (first tasks), else re-run the trials of the next page of whole tasks (up to
    ``EVAL_FINISH_PAGE_TRIALS`` task-trials, as the eval's Finish pages), and append the page's events at or
    after ``fromSeq``, compared in a replay with the source's at the same sequence (by the index's digests; a
    source event is read only at a mismatch). The run's ``cursor`` (next task, draft position, diverged) moves
    with the page's last append, so a retried page rebuilds the same events and skips what ``lastSeq`` shows
    appended. The last page grades (with the rows earlier pages stored under the run) and completes the child.
    ``max_events`` and ``max_ms`` (``kernel.advance``'s) do not bound it: a page does
    (``EVAL_FINISH_PAGE_TRIALS``)."""
    fork = rec.data["fork"]
    from_seq = int(fork["fromSeq"])
    if rec.last_seq < from_seq - 1:
        return forkindex.copy_prefix(ports, rec, stamp=stamp)
    plan = evalplan.load_plan(ports, rec.run_id)
    index = forkindex.load(ports, rec.run_id)
    cur = dict(rec.cursor or {"task": 0, "pos": 0, "diverged": False})
    start, pos0, diverged = int(cur["task"]), int(cur["pos"]), bool(cur["diverged"])
    tools, models = _runtimes(ports, rec, index, tally)
    page = _run_page(ports, rec, plan, start, tools, models)
    hi = pos0 + len(page.drafts)
    events, first_seq, diverged, diverged_at = _page_events(ports, rec, index, page.drafts, pos0, diverged)
    already = rec.last_seq + 1 - first_seq
    if already < 0 or already > len(events):
        raise EngineError("the eval fork's earlier events are not appended")
    updates: dict[str, Any] = (
        {"status": "completed", "completedAt": page.now, **evalpages.summary_updates(ports, rec.run_id, page.summary)}
        if page.last
        else {"cursor": {"task": page.end, "pos": hi, "diverged": diverged}}
    )
    if stamp:
        updates[TASK_STAMP] = stamp  # the page's last append names the task (``kernel.RunKind``)
    try:
        if not page.last:
            ports.blobs.put_json(evalpages.rows_key(rec.run_id, start), page.rows)
        # Records of calls that claimed no effect (every call of a replay: recorded or refused) are written here,
        # 98 to a transaction, before the events that name them; a retried page decides and writes them equal.
        if tools.deferred:
            ports.tool_calls.put_calls(rec.run_id, tools.deferred, rec.expires_at)
        # A page wholly inside the prefix appends nothing: only its cursor moves.
        evalpages.append_chunked(ports, rec, events[already:], updates)
    except (ConflictError, RunGoneError):
        return {"runId": rec.run_id, "next": "done", "waitSeconds": 0}
    out: dict[str, Any] = {"runId": rec.run_id, "next": "done" if page.last else "continue", "waitSeconds": 0}
    if diverged_at is not None:
        out[DIVERGED_AT] = diverged_at  # the kernel marks this task's span (replay.md §7)
    return out


def _runtimes(
    ports: Ports, rec: RunRecord, index: dict[str, Any], tally: ToolTally | None
) -> tuple[ToolRuntime, ModelSession]:
    """The child's tool and model runtimes: a replay resolves every call from the source's record (and serves every
    model call from its log), a branch only those the copied prefix fixed."""
    fork = rec.data["fork"]
    calls = {(str(r["invocationId"]), int(r["index"])): r for r in index.get("calls", [])}
    prefix = _prefix(ports, rec, index, int(fork["fromSeq"]))
    in_prefix = set(prefix["calls"])
    fixed = {k: v for k, v in calls.items() if f"{k[0]}#{k[1]}" in in_prefix}
    mode = str(fork["mode"])
    tools = ToolRuntime(
        ports,
        rec.run_id,
        rec.tenant,
        mode,
        rec.expires_at,
        int(ports.settings.run_tool_call_budget),
        calls if mode == "replay" else None,
        recorded_first=fixed,
        tally=tally,
        deferred=[],
    )
    source_id = str(fork["sourceRunId"])
    # Model calls: a replay serves every one from the source's log; a branch serves those of the prefix.
    models = ModelSession(
        ports,
        rec.run_id,
        rec.tenant,
        mode,
        rec.expires_at,
        (rec.data.get("configurable") or {}).get("ai"),
        source_id,
        fixed_turns={str(k): int(v) for k, v in prefix["turns"].items()},
        tally=tally,
    )
    return tools, models


@dataclass
class _Page:
    """One page of whole tasks re-run: its drafts (the head first on the first page, the closing on the last)."""

    end: int  # the first task after the page
    drafts: list[dict[str, Any]]
    rows: list[Any]
    last: bool
    summary: dict[str, Any]
    now: str


def _run_page(
    ports: Ports, rec: RunRecord, plan: dict[str, Any], start: int, tools: ToolRuntime, models: ModelSession
) -> _Page:
    """Re-run the trials of the page of tasks from ``start`` and draft its events as the eval's Finish does."""
    suite = plan["suite"]
    end = evalpages.page_end(plan, start, int(ports.settings.eval_finish_page_trials))
    trials: dict[tuple[int, int], dict[str, Any]] = {}
    for i in range(start, end):
        for k in range(1, grading.task_trials(suite, suite["tasks"][i]) + 1):
            result = evaltrial.run_trial(ports, rec, i, k, tools, plan=plan, models=models)
            trials[(i, k)] = result.stored()
    now = ports.clock.iso()
    drafts, rows = evalpages.task_drafts(plan, trials, start, end, now)
    if start == 0:
        drafts = _head(ports, rec, plan) + drafts
    last_page = end >= len(suite["tasks"])
    summary: dict[str, Any] = {}
    if last_page:
        earlier = evalpages.earlier_rows(ports, rec.run_id, start) if start else []
        closing, summary = evalpages.closing_drafts(plan, earlier + rows, now, ports.ids.seeded)
        drafts += closing
    return _Page(end, drafts, rows, last_page, summary, now)


def _page_events(
    ports: Ports, rec: RunRecord, index: dict[str, Any], drafts: list[dict[str, Any]], pos0: int, diverged: bool
) -> tuple[list[dict[str, Any]], int, bool, int | None]:
    """The page's events at or after ``fromSeq`` (drafts before it are the copied prefix's), each compared in a
    replay with the source's: (events, the first one's sequence, diverged, this page's divergence sequence)."""
    fork = rec.data["fork"]
    mode, source_id = str(fork["mode"]), str(fork["sourceRunId"])
    # A child sequence is its draft's position, plus one after the divergence event (a replay reports only its
    # first divergence, so positions shift at most once).
    lo = max(pos0, int(fork["fromSeq"]))
    hi = pos0 + len(drafts)
    digests = index.get("digests")
    source: dict[int, dict[str, Any]] = {}
    if mode == "replay" and not diverged and lo < hi and digests is None:  # an index built before digests
        source = {
            int(e["sequence"]): e for e in ports.events.read_events(source_id, lo - 1, limit=hi - lo, settled=True)
        }
    first_seq = seq = lo + (1 if diverged else 0)
    diverged_at: int | None = None  # the sequence of this page's first event the source does not reproduce
    events: list[dict[str, Any]] = []
    for pos in range(lo, hi):
        d = drafts[pos - pos0]
        ev = make_event(ports, rec.run_id, seq, d["type"], d["payload"], None)
        events.append(ev)
        seq += 1
        if mode != "replay" or diverged:
            continue
        if digests is not None:  # compare digests; read the source event only at a mismatch
            same, src = forkindex.reproduces(ports, digests, source_id, pos, ev, rec.run_id)
        else:
            src = source.get(pos)
            same = src is not None and same_json(forkindex.comparable(src), forkindex.comparable(ev))
        if same:
            continue
        diverged = True
        diverged_at = int(ev["sequence"])
        dev = make_event(ports, rec.run_id, seq, c.REPLAY_DIVERGED, forkindex.divergence(source_id, ev, src), None)
        dev["causationId"] = ev["eventId"]
        events.append(dev)
        seq += 1
    return events, first_seq, diverged, diverged_at
